"""Bad input never crashes: each malformed prior file in tests/bad/ gets exit code 2, exactly one line
on stderr naming the file, the line and what was wrong, no traceback, and nothing written.

Each corpus file starts with its expectation:

    # expect: <a fragment of the one-line message>
    # line: <the line the message must name, or - when the error has no line (an empty file)>
    # stage: run        (optional: the error only shows once sampling has run, e.g. conflicting observations)
    # stage: note       (a figure far outside every prior draw, under a likelihood that is nowhere zero:
                         the run goes on and says which observation conflicts with which priors)
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcflops.cli.main import main
from mcflops.spec import MAX_SAMPLES, load_spec

HERE = Path(__file__).resolve().parents[1]
BAD = HERE / "bad"
OK = BAD / "ok" / "small.yaml"
CASES = sorted(BAD.glob("*.yaml"))
MCFLOPS = [sys.executable, "-m", "mcflops.cli"]


def header(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines()[:3]:
        m = re.match(r"# (expect|line|stage): (.*)$", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


STATIC = [c for c in CASES if "stage" not in header(c)]
RUNTIME = [c for c in CASES if header(c).get("stage") == "run"]
NOTED = [c for c in CASES if header(c).get("stage") == "note"]


def cli(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line(err: str, *fragments: str) -> str:
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and err.endswith("\n"), f"expected one line on stderr, got {err!r}"
    line = lines[0]
    assert line.startswith("mcflops: ") and line.isprintable(), line
    for f in fragments:
        assert f in line, f"{f!r} not in {line!r}"
    return line


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_corpus_is_large_and_annotated():
    assert len(CASES) >= 40
    for c in CASES:
        h = header(c)
        assert h.get("expect") and h.get("line"), f"{c.name}: missing '# expect:' / '# line:' header"
        assert h["line"] == "-" or h["line"].isdigit(), c.name


# `run` and `validate` both stop in load_spec, before anything else is done: every case goes through
# `validate`, and one of each kind of mistake (YAML syntax, structure, a value, an observation, a layout, a
# name that would escape the output folder) through `run` too, which must also write nothing.
RUN_CASES = {"yaml_unclosed_flow", "unknown_top_key", "beta_mean_above_one", "observe_value_negative",
             "layout_memory", "name_parent_dirs", "missing_priors", "alias_bomb"}
BY_COMMAND = [(c, "validate") for c in STATIC] + [(c, "run") for c in STATIC if c.stem in RUN_CASES]


def test_the_run_cases_are_in_the_corpus():
    assert {c.stem for c, command in BY_COMMAND if command == "run"} == RUN_CASES


@pytest.mark.parametrize("case, command", BY_COMMAND, ids=lambda x: x.stem if isinstance(x, Path) else x)
def test_bad_file(case, command, tmp_path, monkeypatch, capsys):
    h = header(case)
    monkeypatch.chdir(tmp_path)  # a default reports/<name>/ would land here
    argv = [command, case] + (["--out", tmp_path / "out", "--quiet"] if command == "run" else [])
    rc, out, err = cli(argv, capsys)
    assert rc == 2
    where = f"{case}:{h['line']}:" if h["line"] != "-" else f"{case}:"
    assert_one_line(err, where, h["expect"])
    assert out == ""
    assert list(tmp_path.iterdir()) == [], "a bad file wrote something"


@pytest.mark.parametrize("case", RUNTIME, ids=lambda p: p.stem)
def test_observation_no_draw_can_explain(case, tmp_path, monkeypatch, capsys):
    """Observations that contradict the priors: one line naming the observation; no NaNs, no empty posterior."""
    h = header(case)
    monkeypatch.chdir(tmp_path)
    rc, out, err = cli(["run", case, "--out", tmp_path / "out", "--quiet", "--method", "is"], capsys)
    assert rc == 2, out
    assert_one_line(err, str(case), h["expect"])
    if h["line"] != "-":  # the observation's line, known from the load although the conflict shows after sampling
        assert f"{case}:{h['line']}:" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", NOTED, ids=lambda p: p.stem)
def test_observation_far_outside_the_priors_is_named(case, tmp_path, capsys):
    """30.84M hours with MFU in [0.9, 0.95]: every draw is ~19 sigma away. The likelihood is nowhere zero,
    so the run completes, and says which observation conflicts with which priors; no NaN, no empty posterior."""
    from mcflops import api
    from mcflops.cli.run import print_result

    h = header(case)
    res = api.run(case, method="is")  # what `mcflops run` computes, without its figures and files
    summary = res.to_dict()
    notes = [n for n in summary.get("notes", []) if h["expect"] in n]
    assert len(notes) == 1 and "prior of mfu" in notes[0], summary.get("notes")
    print_result(res, summary)
    assert h["expect"] in " ".join(capsys.readouterr().out.split())  # in the terminal too (lines wrap)
    post = summary["posterior"]
    for name in ("mfu", "gpu_hours"):
        assert all(isinstance(post[name][k], float) and math.isfinite(post[name][k]) for k in ("mean", "p5", "p95"))
    assert 0.9 <= post["mfu"]["p5"] <= post["mfu"]["p95"] <= 0.95


def test_bad_file_leaves_previous_report_untouched(tmp_path, capsys):
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.json").write_text('{"previous": true}\n')
    (out / "notes.txt").write_text("keep me\n")
    before = tree(tmp_path)
    rc, _, err = cli(["run", BAD / "mfu_uniform_above_one.yaml", "--out", out, "--quiet"], capsys)
    assert rc == 2
    assert_one_line(err, "mfu_uniform_above_one.yaml:8:")
    assert tree(tmp_path) == before


# ---------------------------------------------------------------------------- files that are not prior files


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty file"),
    (b"\xff\xfe\x00\x01binary", "not a text file"),
    (b"name: x\npriors:\n  tokens: \"lots\\nof\\ttokens\\e[31m\"\n", "the text 'lots\\nof\\ttokens\\x1b[31m'"),
    (b"name: x\nhardware: {accelerator: h100-sxm}\npriors:\n  \"tok\\nens\": 1\n", "unknown input 'tok\\nens'"),
    (b"name: x\nseed: " + b"9" * 5000 + b"\n", "a number 5000 characters long"),
    (b"[" * 1000, "YAML nests too deeply"),
], ids=["empty", "binary", "newline-in-value", "newline-in-key", "5000-digit-int", "deep-nesting"])
def test_not_a_prior_file(content, fragment, tmp_path, capsys):
    f = tmp_path / "f.yaml"
    f.write_bytes(content)
    rc, _, err = cli(["validate", f], capsys)
    assert rc == 2
    assert_one_line(err, str(f), fragment)


def test_missing_file_and_folder(tmp_path, capsys):
    rc, _, err = cli(["run", tmp_path / "nope.yaml"], capsys)
    assert rc == 2
    assert_one_line(err, "nope.yaml", "no such file")
    rc, _, err = cli(["validate", tmp_path], capsys)
    assert rc == 2
    assert_one_line(err, "is a directory")
    assert list(tmp_path.iterdir()) == []


def test_yaml_tags_are_refused_not_constructed(tmp_path, capsys):
    """`!!python/object/apply:os.system` would run a command under an unsafe loader."""
    marker = tmp_path / "pwned"
    for where in ("description", "priors"):
        f = tmp_path / f"{where}.yaml"
        payload = f'!!python/object/apply:os.system ["touch {marker}"]'
        body = {"description": f"name: x\ndescription: {payload}\npriors: {{params: 1e9, tokens: 1e12, mfu: 0.4}}\n",
                "priors": f"name: x\npriors:\n  params: {payload}\n  tokens: 1e12\n  mfu: 0.4\n"}[where]
        f.write_text(body)
        rc, _, err = cli(["validate", f], capsys)
        assert rc == 2
        assert_one_line(err, "tag '!!python/object/apply:os.system' is not allowed")
    assert not marker.exists()


# ---------------------------------------------------------------------------- command-line arguments


@pytest.mark.parametrize("args, fragments", [
    (["--samples", "lots"], ["--samples", "lots"]),
    (["--samples", "1.5"], ["--samples"]),
    (["--seed", "-1"], ["--seed"]),
    (["--method", "magic"], ["--method", "magic"]),
], ids=["samples-words", "samples-fraction", "seed-negative", "method-unknown"])
def test_bad_arguments(args, fragments, tmp_path, capsys):
    rc, out, err = cli(["run", OK, "--out", tmp_path / "out", *args], capsys)
    assert rc == 2
    assert_one_line(err, *fragments)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("samples, fragments", [
    ("0", ["--samples", "at least 1000"]),
    ("1e15", ["--samples", "would take", "the limit is 1e+10"]),
])
def test_absurd_sample_counts_refused_before_sampling(samples, fragments, tmp_path, capsys):
    rc, _, err = cli(["run", OK, "--out", tmp_path / "out", "--samples", samples], capsys)
    assert rc == 2
    assert_one_line(err, *fragments)
    assert list(tmp_path.iterdir()) == []


def test_sample_cap_is_exact_and_estimates_time():
    base = {"name": "cap", "hardware": {"accelerator": "h100-sxm"},
            "priors": {"params": 1e9, "tokens": 1e12, "mfu": {"beta": [0.3, 0.5]}}}
    assert load_spec({**base, "samples": MAX_SAMPLES}).samples == MAX_SAMPLES
    with pytest.raises(Exception) as e:
        load_spec({**base, "samples": MAX_SAMPLES + 1})
    hours = re.search(r"~([\d.]+) h", str(e.value))
    assert type(e.value).__name__ == "SpecError" and hours and float(hours.group(1)) > 0, str(e.value)


# ---------------------------------------------------------------------------- where output may go


def test_out_refuses_a_folder_that_is_not_a_report(tmp_path, capsys):
    """`run` replaces its folder as a whole: `--out .` must not delete the user's files."""
    (tmp_path / "precious.txt").write_text("data\n")
    before = tree(tmp_path)
    rc, _, err = cli(["run", OK, "--out", tmp_path, "--quiet"], capsys)
    assert rc == 2
    assert_one_line(err, "--out", "not an mcflops report")
    assert tree(tmp_path) == before


def test_out_refuses_a_file(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x\n")
    rc, _, err = cli(["run", OK, "--out", f, "--quiet"], capsys)
    assert rc == 2
    assert_one_line(err, "--out", "not a folder")
    rc, _, err = cli(["run", OK, "--out", f / "below", "--quiet"], capsys)
    assert rc == 2
    assert_one_line(err, "--out", "is not a folder")
    assert tree(tmp_path) == {"file": b"x\n"}


def test_name_cannot_leave_the_reports_folder(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name in ("../../etc", "../escape", "/tmp/abs", "a/b", ".", "..", ".hidden", "x" * 101, "nul\x00"):
        d = {"name": name, "hardware": {"accelerator": "h100-sxm"},
             "priors": {"params": 1e9, "tokens": 1e12, "mfu": 0.4}}
        with pytest.raises(Exception) as e:
            load_spec(d)
        assert type(e.value).__name__ == "SpecError" and "name" in str(e.value), name
    assert list(tmp_path.rglob("*")) == [work]


def test_prior_text_is_escaped_in_the_terminal(tmp_path, capsys):
    """Rich markup and escape sequences in a description or source are shown as text, not obeyed."""
    rc, out, err = cli(["sample", BAD / "ok" / "hostile.yaml"], capsys)
    assert rc == 0, err
    assert "Traceback" not in err
    assert "[/] [bold red]not markup[/bold red]" in out
    assert "\x1b" not in out  # not a terminal: no escape sequence at all, least of all the file's own


# ---------------------------------------------------------------------------- real processes


def _subprocess(args, cwd, timeout=120):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent)}
    return subprocess.run([*MCFLOPS, *map(str, args)], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.parametrize("case", ["yaml_unclosed_flow", "python_object_tag", "duplicate_observation",
                                  "samples_huge"])
def test_bad_file_in_a_real_process(case, tmp_path):
    f = BAD / f"{case}.yaml"
    h = header(f)
    p = _subprocess(["run", f, "--out", tmp_path / "out"], cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert p.stdout == ""
    assert_one_line(p.stderr, f"{f}:{h['line']}:", h["expect"])
    assert list(tmp_path.iterdir()) == []
