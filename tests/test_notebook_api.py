"""The notebook's API: top-level functions with keyword overrides, and a Result that displays itself."""

import json
from html.parser import HTMLParser

import jax
import numpy as np
import pytest

import mcflops
from mcflops.engine import KEEP
from mcflops.errors import UsageError
from tests.test_api import SPEC

SMALL = {**SPEC, "samples": 20_000}
B = {**SMALL, "name": "api-70b", "priors": {**SPEC["priors"], "params": "70B"}}


@pytest.fixture(scope="module")
def res():
    return mcflops.run({**SPEC, "description": "<script>alert(1)</script> & co"}, method="is")


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text, self.open = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in ("br", "hr", "img"):  # void elements have no end tag
            self.open.append(tag)

    def handle_endtag(self, tag):
        assert self.open and self.open[-1] == tag, (self.open, tag)  # well nested
        self.open.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_top_level_names():
    for name in ("run", "sample", "plan", "compare", "sensitivity", "calibrate", "ladder", "Result"):
        assert callable(getattr(mcflops, name)), name


def test_repr_is_a_few_lines(res):
    text = repr(res)
    assert 3 <= text.count("\n") + 1 <= 8 and len(text) < 800, text
    assert "api-test" in text and "gpu_hours" in text and "posterior" in text
    assert mcflops.numbers.format_number(res.prior["gpu_hours"]["p50"]) in text

    class Printer:
        def text(self, t):
            self.out = t

    p = Printer()
    res._repr_pretty_(p, False)
    assert p.out == text


def test_repr_html_parses_and_holds_the_headline(res):
    page = res._repr_html_()
    parser = _Cells()
    parser.feed(page)
    parser.close()
    assert not parser.open and "table" in parser.tags and "script" not in parser.tags
    text = "".join(parser.text)
    assert "<script>alert(1)</script> & co" in text  # the description, escaped, shown as text
    fmt = mcflops.numbers.format_number
    for name in ("gpu_hours", "wall_days", "cost"):
        for which in (res.prior, res.posterior):
            for k in ("p5", "p50", "p95"):
                assert fmt(which[name][k]) in text, (name, k)
    assert f"ESS {res.posterior['ess']:,.0f}" in text and "importance" in text


def test_quantile_reads_the_summary(res):
    for which, stats in (("prior", res.prior), ("posterior", res.posterior)):
        for name in ("gpu_hours", "mfu", "cost"):
            got = res.quantile(name, [0.05, 0.25, 0.5, 0.75, 0.95], which=which)
            assert got.tolist() == [stats[name][k] for k in ("p5", "p25", "p50", "p75", "p95")], (which, name)
    assert res.quantile("gpu_hours", 0.5) == res.posterior["gpu_hours"]["p50"]  # default: the posterior
    assert res.quantile("params", 0.9) == 405.9e9  # a point mass
    with pytest.raises(KeyError):
        res.quantile("nonsense", 0.5)
    with pytest.raises(ValueError):
        res.quantile("mfu", 1.5)


def test_table_rows_and_dataframe(res, monkeypatch):
    df = res.table()
    assert type(df).__name__ == "DataFrame"
    row = df[(df.quantity == "gpu_hours") & (df.distribution == "posterior")].iloc[0]
    assert row["p50"] == res.posterior["gpu_hours"]["p50"]
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)  # pandas absent: plain rows
    rows = res.table()
    assert isinstance(rows, list) and len(rows) == len(df)
    assert {"quantity": "mfu", "distribution": "prior", **{k: res.prior["mfu"][k] for k in ("p5", "p95")}}.items() \
        <= next(r for r in rows if r["quantity"] == "mfu").items()


def test_to_arviz_equals_posterior_nc(res, tmp_path):
    arviz = pytest.importorskip("arviz")
    from mcflops.inference import netcdf

    back = arviz.from_netcdf(netcdf.write_netcdf(res.record.groups, tmp_path / "posterior.nc"))
    dt = res.to_arviz()
    assert list(dt.children) == list(back.children)
    assert dt.attrs == back.attrs
    for group in back.children:
        a, b = dt[group].ds, back[group].ds
        assert sorted(a.data_vars) == sorted(b.data_vars), group
        for name in b.data_vars:
            np.testing.assert_array_equal(a[name].values, b[name].values)
            assert a[name].dims == b[name].dims
            assert {k: v for k, v in a[name].attrs.items()} == dict(b[name].attrs), (group, name)


def test_posterior_draws_are_keep_minus_one(res):
    """The reservoir's smallest key is the priority-sampling threshold, not a draw (documented on Result)."""
    assert res.draws["gpu_hours"].shape == (KEEP,)
    assert res.posterior_draws["gpu_hours"].shape == (KEEP - 1,)


def test_sample_is_the_prior_predictive_only():
    s = mcflops.sample(SMALL)
    assert s.posterior is None and s.sensitivity is None and s.samples == 20_000
    r = mcflops.run(SMALL, posterior=False)
    assert s.prior == r.prior


def test_overrides_and_key():
    a = mcflops.sample(SMALL, samples=10_000, seed=5)
    assert (a.samples, a.seed, a.spec.samples, a.spec.seed) == (10_000, 5, 10_000, 5)
    b = mcflops.sample(SMALL, samples=10_000, key=jax.random.key(5))  # the key replaces key(seed)
    assert b.prior == a.prior and b.seed == SMALL["seed"]
    assert mcflops.sample(SMALL, samples=10_000, key=jax.random.key(6)).prior != a.prior
    for bad in ({"samples": 0}, {"seed": -1}):
        with pytest.raises(UsageError, match=rf"^mcflops\.sample\({next(iter(bad))}=\)"):
            mcflops.sample(SMALL, **bad)


def test_plan_compare_sensitivity_are_the_cli_json(tmp_path, capsys):
    from mcflops import cli

    f, g = tmp_path / "a.yaml", tmp_path / "b.yaml"
    f.write_text(json.dumps(SMALL))
    g.write_text(json.dumps(B))
    p = mcflops.plan(f, deadline_days=90, budget_usd="50M")
    assert cli.main(["plan", str(f), "--deadline-days", "90", "--budget-usd", "50M", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out) == p
    by_seed, by_key = mcflops.plan(f, deadline_days=90, seed=7), mcflops.plan(f, deadline_days=90, key=jax.random.key(7))
    assert by_key == {**by_seed, "seed": 3} and by_seed["gpu_hours"] != p["gpu_hours"]  # the key replaces key(seed)
    with pytest.raises(UsageError, match=r"mcflops\.plan\(deadline_days=\)"):
        mcflops.plan(f, deadline_days=-1)
    c = mcflops.compare(f, g)
    assert cli.main(["compare", str(f), str(g), "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out) == c
    assert c["ratio"]["p50"] < 1
    assert mcflops.compare(f, g, key=jax.random.key(7)) == {**mcflops.compare(f, g, seed=7), "seed": 3}
    s = mcflops.sensitivity(mcflops.load_spec(f), sobol_samples=4096, points=3, sweeps=["mfu=0.3:0.45"])
    assert cli.main(["sensitivity", str(f), "--sobol-samples", "4096", "--points", "3", "--sweep", "mfu=0.3:0.45",
                     "--json", "--quiet"]) == 0
    assert _untimed(json.loads(capsys.readouterr().out)) == _untimed(s)
    with pytest.raises(UsageError, match=r"mcflops\.sensitivity\(output=\)"):
        mcflops.sensitivity(f, output="nonsense")


def _untimed(x):
    if isinstance(x, dict):
        return {k: _untimed(v) for k, v in x.items() if k != "seconds"}
    return [_untimed(v) for v in x] if isinstance(x, list) else x


def test_calibrate_names_a_bad_argument():
    # the fit itself (chains=1, draws=50, loo=False: its runs, population, posterior, no "loo", plain JSON) is
    # tests/calibration/test_api_agrees.py::test_cli_and_api_fit_the_same_numbers; a second fit here only compiled
    # and ran the same sampler again
    with pytest.raises(UsageError, match=r"mcflops\.calibrate\(draws=\)"):
        mcflops.calibrate(draws=10)


def test_readme_python_example_runs(monkeypatch, capsys):
    """The README's Python API example, verbatim, from the repository root."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    blocks = re.findall(r"```python\n(.*?)```", (root / "README.md").read_text(), flags=re.S)
    assert blocks, "the README documents the Python API"
    monkeypatch.chdir(root)
    scope: dict = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)
    assert isinstance(scope["res"], mcflops.Result) and scope["res"].posterior is not None
    assert scope["prior"].posterior is None
    lines = capsys.readouterr().out.splitlines()
    medians = [float(line.split()[-1]) for line in lines[-3:]]
    assert medians[0] > medians[1] > medians[2]  # higher MFU, fewer GPU-hours


def test_the_notebook_executes(monkeypatch, jax_cache_env):
    """reports/notebook.ipynb, executed top to bottom in a fresh kernel started in reports/ (where Jupyter
    starts it), and committed with its outputs (a reader on GitHub sees them): the fresh outputs say what the
    committed ones say, at the precision they are printed with."""
    import copy
    from pathlib import Path

    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")  # jupyter_core's own paths, without its warning
    for k, v in jax_cache_env.items():  # the kernel loads what the tests compiled (the README's example's runs)
        monkeypatch.setenv(k, v)
    root = Path(__file__).resolve().parents[1]
    committed = nbformat.read(root / "reports" / "notebook.ipynb", as_version=4)
    code = [c for c in committed.cells if c.cell_type == "code"]
    src = "".join(c.source for c in code)
    assert "mcflops." in src and "from mcflops" not in src and "mcflops.api" not in src  # the public API only
    assert all(c.outputs for c in code), "committed with its outputs"
    nb = copy.deepcopy(committed)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(root / "reports")}}).execute()
    first = nb.cells[1].outputs[0]["data"]
    assert "text/html" in first and "gpu_hours" in first["text/html"] and "Result(llama405b" in first["text/plain"]
    assert "0.35" in nb.cells[-1].outputs[0]["data"]["text/plain"]
    for new, old in zip(nb.cells, committed.cells):
        if new.cell_type == "code":
            fresh, kept = _texts(new), _texts(old)
            assert [_words(t) for t in fresh] == [_words(t) for t in kept], new.source
            for a, b in zip(fresh, kept):  # float32 sums: rounding is ~1e-7 of a value, 1e-4 leaves 1000x room
                np.testing.assert_allclose(_numbers(a), _numbers(b), rtol=1e-4, err_msg=new.source)


_NUM = r"-?\d[\d,]*\.?\d*(?:e[+-]?\d+)?"


def _texts(cell) -> list[str]:
    """A cell's plain-text outputs, the run's header (device and seconds: this machine's) left out."""
    import re

    out = [o.get("data", {}).get("text/plain", o.get("text", "")) for o in cell.outputs]
    return [re.sub(r"seed (\d+), [^,]+, [0-9.]+ s\)", r"seed \1)", t) for t in out]


def _words(text: str) -> str:
    """The text with its numbers as # and without whitespace: NumPy pads an array's numbers to one width, so
    the spaces move with the digits (``array([#, # , #])`` on one build, ``array([#, #, #])`` on another)."""
    import re

    return re.sub(r"\s+", "", re.sub(_NUM, "#", text))


def _numbers(text: str) -> list[float]:
    import re

    return [float(x.replace(",", "")) for x in re.findall(_NUM, text)]
