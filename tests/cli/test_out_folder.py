"""`run --out` replaces its folder as a whole, so only a report mcflops wrote may be replaced: a
summary.json that parses with mcflops' own keys, and nothing in the folder a report does not hold.
Anything else is refused in one line naming the folder, and nothing is deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcflops import cli

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
OWN = {"name": "small", "seed": 7, "samples": 5000, "spec_hash": "ab12", "version": "0.1"}


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def refused(out: Path, capsys) -> str:
    before = tree(out.parent)
    rc = cli.main(["run", str(OK), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert str(out) in err and "not an mcflops report" in err, err
    assert tree(out.parent) == before  # nothing deleted, nothing written beside it
    return err


def test_an_empty_summary_does_not_make_a_report(tmp_path, capsys):
    """The reproduction: `echo {} > D/summary.json; echo x > D/thesis.tex; mcflops run small.yaml --out D`."""
    d = tmp_path / "D"
    d.mkdir()
    (d / "summary.json").write_text("{}\n")
    (d / "thesis.tex").write_text("x\n")
    assert "lacks mcflops' keys" in refused(d, capsys)


@pytest.mark.parametrize("summary", ["{not json", "[]", "null", json.dumps({"name": "x", "samples": 1})])
def test_a_summary_that_is_not_mcflops_json_is_refused(summary, tmp_path, capsys):
    d = tmp_path / "D"
    d.mkdir()
    (d / "summary.json").write_text(summary)
    (d / "report.md").write_text("# mine\n")
    refused(d, capsys)


@pytest.mark.parametrize("extra", ["thesis.tex", "notes.txt", ".git"])
def test_a_report_holding_other_files_is_refused(extra, tmp_path, capsys):
    d = tmp_path / "D"
    d.mkdir()
    (d / "summary.json").write_text(json.dumps(OWN))
    (d / "report.html").write_text("<p>old</p>\n")
    (d / extra).write_text("keep me\n")
    assert repr(extra) in refused(d, capsys)


def test_a_report_holding_a_folder_is_refused(tmp_path, capsys):
    d = tmp_path / "D"
    (d / "figures").mkdir(parents=True)
    (d / "figures" / "x.png").write_bytes(b"\x89PNG")
    (d / "summary.json").write_text(json.dumps(OWN))
    assert "'figures'" in refused(d, capsys)


def test_a_report_run_wrote_is_replaced(tmp_path, capsys):
    d = tmp_path / "D"
    for _ in range(2):
        assert cli.main(["run", str(OK), "--out", str(d), "--quiet", "--json"]) == 0
    capsys.readouterr()
    assert {"summary.json", "spec.resolved.yaml", "report.md", "report.html"} <= set(tree(d))


def test_write_fit_writes_compact_or_indented_json_and_a_failure_is_one_line(tmp_path):
    """Both `calibrate --write` paths share output.write_fit: the JSON reads back equal either way (compact
    for the calibration fit, indented for the layout fit), and a file that cannot be written is one
    SpecError naming it and the --write flag."""
    import json

    from mcflops import output
    from mcflops.errors import SpecError

    fit = {"a": [1.5, 2], "b": {"c": "d"}}
    compact, indented = tmp_path / "c.json", tmp_path / "i.json"
    output.write_fit(compact, fit, where=compact)
    output.write_fit(indented, fit, where=indented, indent=1)
    assert json.loads(compact.read_text()) == json.loads(indented.read_text()) == fit
    assert "\n" not in compact.read_text().rstrip("\n") and indented.read_text().count("\n") > 3
    missing = tmp_path / "no-such-folder" / "fit.json"
    with pytest.raises(SpecError) as err:
        output.write_fit(missing, fit, where=missing)
    assert err.value.field == "--write" and "no-such-folder" in str(err.value) and "\n" not in str(err.value)
