"""One reader for every file the tool reads (mcflops/reading.py): prior files, the files watch follows, Hugging Face
configs and a run folder's summary.json each get the size cap, the encoding message, the nesting and surrogate
guards, as one line; the same hostile file is refused the same way wherever it is handed in."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from mcflops import cli, reading
from mcflops.arch import hf
from mcflops.cli import watch
from mcflops.errors import SpecError
from mcflops.output import folder as run_folder
from mcflops.report import load as load_report

BAD = Path(__file__).resolve().parent / "bad"


def _readers(tmp_path):
    """Each reader, given a path to put in its place: (name, call)."""
    run = tmp_path / "run"
    run.mkdir()

    def summary(p):
        (run / "summary.json").unlink(missing_ok=True)
        (run / "summary.json").symlink_to(p)
        return load_report(run)

    return [("config", lambda p: hf.read_config(p)), ("summary", summary)]


@pytest.mark.parametrize("which", ["config", "summary"])
def test_dev_zero_is_refused_at_the_cap_not_read(tmp_path, which):
    call = dict(_readers(tmp_path))[which]
    t = time.perf_counter()
    with pytest.raises(SpecError, match=r"larger than \d+ MB: not ") as e:
        call("/dev/zero")
    assert time.perf_counter() - t < 2.0  # read up to the cap (64 MB at most), not until memory runs out
    assert len(str(e.value).splitlines()) == 1


@pytest.mark.parametrize("which", ["config", "summary"])
def test_json_nested_past_the_recursion_limit_is_one_line(tmp_path, which):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(SpecError, match="nested too deeply"):
        dict(_readers(tmp_path))[which](deep)


@pytest.mark.parametrize("which", ["config", "summary"])
def test_a_lone_surrogate_escape_is_refused(tmp_path, which):
    """json.loads turns "\\ud800" into a str that no UTF-8 file can hold: a report quoting it would fail later."""
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"name": "\ud800", "seed": 0}))  # json.dumps escapes it as ASCII
    with pytest.raises(SpecError, match=r"lone surrogate \(\\ud800\)"):
        dict(_readers(tmp_path))[which](f)


def test_a_bad_byte_is_named_with_its_line_in_every_format(tmp_path):
    f = tmp_path / "latin.json"
    f.write_bytes(b'{\n  "hidden_size": 4096,\n  "model_type": "caf\xe9"\n}\n')
    with pytest.raises(SpecError, match=r"latin\.json:3: not a text file: byte 0xe9 is not UTF-8"):
        hf.read_config(f)


def test_a_utf16_config_reads_as_its_text(tmp_path):
    cfg = BAD.parent.parent / "priors" / "examples" / "mixtral-8x7b" / "config.json"
    f = tmp_path / "config.json"
    f.write_bytes(cfg.read_text().encode("utf-16"))
    assert hf.read_config(f) == hf.read_config(cfg)


def test_not_a_report_and_report_refuse_the_same_summary(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").symlink_to("/dev/zero")
    assert run_folder.not_a_report(run) == "its summary.json is not mcflops' JSON"
    rc = cli.main(["report", str(run)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "larger than 64 MB" in err, err
    assert sorted(p.name for p in run.iterdir()) == ["summary.json"]  # nothing written
    (run / "summary.json").unlink()
    assert run_folder.not_a_report(run) == "no summary.json"


def test_a_summary_that_is_not_an_object_is_one_line(tmp_path):
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="expected a JSON object"):
        reading.read_summary(tmp_path)


@pytest.mark.parametrize("name", ["alias_bomb.yaml", "alias_recursive.yaml"])
def test_watch_follows_nothing_from_an_alias_bomb(tmp_path, name):
    """A watched file saved as an alias bomb or a self-referencing alias: the prior files' guards, so named_files
    returns at once with the file alone (the next run reports what is wrong)."""
    f = tmp_path / "watched.yaml"
    f.write_bytes((BAD / name).read_bytes())
    t = time.perf_counter()
    assert watch.named_files(f) == [f]
    assert time.perf_counter() - t < 2.0


def test_watch_reads_no_further_than_the_cap(tmp_path):
    f = tmp_path / "watched.yaml"
    f.symlink_to("/dev/zero")
    t = time.perf_counter()
    assert watch.named_files(f) == [f]
    assert time.perf_counter() - t < 2.0


def test_a_comparison_folder_is_read_by_the_same_reader(tmp_path):
    from mcflops.report import comparison

    (tmp_path / comparison.DATA).symlink_to("/dev/zero")
    with pytest.raises(SpecError, match=r"compare.json: larger than 64 MB: not a compare.json mcflops wrote"):
        comparison.render(tmp_path)


def test_a_file_that_is_not_a_prior_file_is_a_read_error_naming_it(tmp_path, capsys):
    """A Hugging Face config.json and a run folder's summary.json are not prior files: their mistakes are
    ReadErrors (still SpecErrors, for every handler of bad input) naming that file; the CLI exits 2."""
    from mcflops.arch import read_config
    from mcflops.cli.main import main
    from mcflops.errors import ReadError
    from mcflops.reading import read_summary

    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "lama"}')
    with pytest.raises(ReadError, match=r"unknown model_type 'lama'; did you mean 'llama'\?") as e:
        read_config(str(cfg))
    assert isinstance(e.value, SpecError) and str(e.value).startswith(f"{cfg}: ")
    assert main(["arch", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err == f"mcflops: {e.value}\n", err
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text("[1, 2]")
    with pytest.raises(ReadError, match="expected a JSON object") as e:
        read_summary(tmp_path / "run")
    assert e.value.path == str(tmp_path / "run" / "summary.json")
    with pytest.raises(ReadError, match="not a run folder"):
        read_summary(tmp_path)
