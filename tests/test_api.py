"""The public surface: what a notebook imports, what the CLI prints and writes."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import mcflops
from mcflops import cli

ROOT = Path(__file__).resolve().parents[1]
SPEC = {
    "name": "api-test", "seed": 3, "samples": 50_000,
    "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 16384},
    "priors": {"params": "405.9B", "tokens": {"lognormal": ["15.0T", "16.8T"]},
               "mfu": {"beta": {"mean": 0.40, "sd": 0.03}}, "goodput": {"beta": [0.85, 0.97]},
               "price": {"lognormal": [2.0, 4.0]}},
    "observe": {"gpu_hours": {"value": "30.84M", "sigma": 0.05}},
}


def test_public_api_surface():
    for name in ("load_spec", "run", "Result", "Spec", "SpecError", "ReadError", "UsageError", "resolved_dict",
                 "__version__"):
        assert hasattr(mcflops, name), name
    assert re.match(r"^\d+\.\d+", mcflops.__version__)


def test_run_from_a_dict_gives_the_summary_contract():
    res = mcflops.run(SPEC)
    d = res.to_dict()
    for k in ("name", "seed", "samples", "device", "version", "spec_hash", "chain", "prior", "observed",
              "posterior"):
        assert k in d, k
    for q in ("tokens", "mfu", "goodput", "price", "flops", "gpu_hours", "wall_days", "cost", "energy_mwh"):
        s = d["prior"][q]
        assert set(s) >= {"mean", "sd", "p5", "p25", "p50", "p75", "p95", "mcse_p50"}
        assert s["p5"] <= s["p25"] <= s["p50"] <= s["p75"] <= s["p95"]
    assert 0 < d["observed"]["gpu_hours"]["prior_percentile"] < 100
    assert d["chain"]["implied_mfu"] == pytest.approx(6 * 405.9e9 * d["chain"]["tokens"] / (989.4e12 * 30.84e6 * 3600))
    assert res.draws["gpu_hours"].shape == (4000,)
    json.dumps(d)  # plain JSON


def test_resolved_spec_reloads_to_the_same_spec():
    spec = mcflops.load_spec(SPEC)
    again = mcflops.load_spec(mcflops.resolved_dict(spec))
    assert again.digest() == spec.digest()


def test_cli_run_writes_summary_and_resolved_spec(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(SPEC))  # JSON is YAML
    out = tmp_path / "out"
    assert cli.main(["run", str(f), "--out", str(out), "--json", "--samples", "20000"]) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((out / "summary.json").read_text())
    assert printed["prior"] == saved["prior"] and saved["samples"] == 20000
    digest = mcflops.load_spec({**SPEC, "samples": 20000}).digest()
    assert mcflops.load_spec(out / "spec.resolved.yaml").digest() == digest
    # every figure and posterior.nc name the run they came from
    from PIL import Image

    pngs = sorted(out.glob("*.png"))
    assert len(pngs) >= 3, pngs
    for png in pngs:
        with Image.open(png) as im:
            assert im.text.get("mcflops spec") == digest, png.name
    import h5netcdf

    with h5netcdf.File(out / "posterior.nc", "r") as nc:
        assert nc.attrs["spec_hash"] == digest


def test_cli_sample_prints_a_table_and_writes_nothing(tmp_path, capsys, monkeypatch):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(SPEC))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["sample", str(f), "--samples", "1e4"]) == 0
    text = capsys.readouterr().out
    assert "gpu_hours" in text and "6·N·D" in text and "percentile" in text
    assert not (tmp_path / "reports").exists()


def test_cli_validate_schema_and_help(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(SPEC))
    assert cli.main(["validate", str(f)]) == 0
    assert "ok" in capsys.readouterr().out
    assert cli.main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert set(schema["properties"]["priors"]["properties"]) >= {"params", "tokens", "mfu", "goodput"}
    with pytest.raises(SystemExit) as e:
        cli.main(["run", "--help"])
    assert e.value.code == 0
    assert "--samples" in capsys.readouterr().out


def test_bad_file_is_one_line_and_exit_2(tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\npriors:\n  params: 1e9\n  tokens: 1e12\n  mfu: {beta: [0.5, 0.4]}\n")
    assert cli.main(["run", str(f), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.yaml:5" in err and "priors.mfu" in err and "p5 < p95" in err
    assert not (tmp_path / "o").exists()


def test_readme_commands_and_ci_agree():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
    commands = [line for b in blocks for line in b.splitlines() if line and not line.startswith("#")]
    test_cmd = next(c for c in commands if "pytest" in c)
    run_cmd = next(c for c in commands if "mcflops run priors/llama405b.yaml" in c)
    assert test_cmd in ci.splitlines(), "CI must run the README's test command verbatim"
    assert run_cmd.startswith("python3 -m venv .venv")
    assert (ROOT / "priors" / "llama405b.yaml").exists()


def test_numpy_scalars_in_a_dict():
    spec = {**SPEC, "seed": np.int64(3), "samples": np.int64(50_000),
            "hardware": {**SPEC["hardware"], "count": np.int64(16384)},
            "priors": {**SPEC["priors"], "mfu": {"beta": {"mean": np.float64(0.40), "sd": np.array([0.03])}}},
            "observe": {"gpu_hours": {"value": np.float64(30.84e6), "sigma": np.array(0.05)}},
            "plan": {"deadline_days": np.int32(90)}}
    plain = {**SPEC, "plan": {"deadline_days": 90}}
    assert mcflops.load_spec(spec).digest() == mcflops.load_spec(plain).digest()
    with pytest.raises(mcflops.SpecError, match="got bool"):
        mcflops.load_spec({**SPEC, "seed": np.bool_(True)})
    with pytest.raises(mcflops.SpecError):
        mcflops.load_spec({**SPEC, "samples": np.array([1, 2])})  # two numbers where one goes
