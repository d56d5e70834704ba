"""Input that passed every check and then crashed (a traceback, exit 1) now gets one line and exit 2:
files that are not UTF-8 or too large to be prior files, text no file can hold, a terminal given nulls
(a zero-variance input), `mcflops report` on a read-only folder or on a summary.json mcflops could not
have written. UTF-16 with a byte-order mark is read as the text it is."""

from __future__ import annotations

import errno
import json
import tempfile
from pathlib import Path

import pytest

import mcflops
from mcflops import cli

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"


def one_line(argv, capsys) -> str:
    rc = cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_a_utf16_file_reads_as_its_text(tmp_path):
    for enc in ("utf-16", "utf-8-sig"):  # each with its byte-order mark (Windows editors)
        f = tmp_path / f"{enc}.yaml"
        f.write_bytes(OK.read_text().encode(enc))
        assert mcflops.load_spec(f).digest() == mcflops.load_spec(OK).digest()


def test_a_latin1_byte_is_named_with_its_line(tmp_path, capsys):
    f = tmp_path / "latin.yaml"
    f.write_bytes(OK.read_text().replace("an 8B model", "an 8B mod\u00e8l").encode("latin-1"))
    err = one_line(["validate", f], capsys)
    assert f"{f}:3:" in err and "byte 0xe8 is not UTF-8" in err


def test_a_file_too_large_is_refused_before_it_is_read(capsys):
    err = one_line(["validate", "/dev/zero"], capsys)  # endless: read in full it would exhaust memory
    assert "/dev/zero: larger than 1 MB" in err


@pytest.mark.parametrize("field, value", [("description", "a \ud800 b"), ("source", "x \udc80")])
def test_a_lone_surrogate_in_a_dict_is_refused(field, value):
    spec = {"name": "s", "hardware": {"accelerator": "h100-sxm"},
            "priors": {"params": 8e9, "tokens": {"lognormal": [1e12, 2e12]}, "mfu": {"beta": [0.3, 0.5]}}}
    if field == "description":
        spec["description"] = value
    else:
        spec["priors"]["tokens"]["source"] = value
    with pytest.raises(mcflops.SpecError, match="lone surrogate") as e:
        mcflops.load_spec(spec)
    assert (e.value.field or "").endswith(field if field == "description" else "tokens.source")


def test_a_terminal_given_nulls_prints_n_a(capsys):
    """A zero-variance input makes correlations NaN and an out-of-range figure an undefined implied MFU:
    summary.json holds null there, and the terminal prints n/a instead of crashing after the report."""
    from mcflops.cli.run import print_result

    res = mcflops.run(OK, samples=2000)
    data = res.to_dict()
    data["chain"].update(implied_mfu=None, implied_mfu_x_goodput=None, mfu=None)
    data["posterior"].update(corr_mfu_goodput_log=None, ess=None, pareto_k=None)
    data["observed"]["gpu_hours"]["prior_percentile"] = None
    res.prior["gpu_hours"]["sd"] = None
    print_result(res, data)
    out = capsys.readouterr().out
    assert "n/a" in out and "posterior correlation of log MFU and log goodput: n/a" in out


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("r") / "report"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    return out


def test_report_on_a_read_only_folder(report, monkeypatch, capsys):
    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")

    before = {p.name: p.read_bytes() for p in report.iterdir()}
    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    err = one_line(["report", report], capsys)
    assert "cannot write report.md: Read-only file system" in err
    assert {p.name: p.read_bytes() for p in report.iterdir()} == before


@pytest.mark.parametrize("summary, expect", [
    ("[" * 100_000, "nested too deep"),
    ({"prior": "x", "chain": [1]}, "a field of the wrong kind"),
    ([1, 2], "not a summary.json mcflops wrote"),
], ids=["deep", "prior-text", "list"])
def test_report_on_a_summary_mcflops_did_not_write(summary, expect, report, tmp_path, capsys):
    d = tmp_path / "copy"
    d.mkdir()
    if isinstance(summary, dict):
        summary = json.dumps({**json.loads((report / "summary.json").read_text()), **summary})
    elif isinstance(summary, list):
        summary = json.dumps(summary)
    (d / "summary.json").write_text(summary)
    err = one_line(["report", d], capsys)
    assert f"{d / 'summary.json'}: " in err and expect in err, err
    assert sorted(p.name for p in d.iterdir()) == ["summary.json"]


@pytest.mark.parametrize("seed", [2**63, 2**64, -1])
def test_a_seed_jax_cannot_take_is_refused(seed, capsys):
    with pytest.raises(mcflops.UsageError, match=r"^mcflops\.sample\(seed=\): expected a seed from 0 to 2"):
        mcflops.sample(OK, seed=seed)
    if seed >= 0:
        rc = None
        try:
            rc = cli.main(["sample", str(OK), "--seed", str(seed)])
        except SystemExit as e:  # argparse's own error line
            rc = e.code
        err = capsys.readouterr().err
        assert rc == 2 and "expected a seed below 2**63" in err and len(err.splitlines()) == 1, err
