"""The adversarial corpus: each way a hostile user broke a promise, as a case that must hold from now on.

Most cases are static (a bad value through `validate`, `arch`, `watch`'s argument check or a writer called
directly): exit code 2, exactly one line naming the place once, nothing written. Signals and SIGKILL need a
real process: those cases start one, made to reach its point deterministically (an audit hook, a marker file).

Covered elsewhere, not repeated here: an observation far outside the prior is withheld or matches a quadrature
(tests/inference/test_edges.py); watch stops on the first SIGINT or SIGTERM while idle, sampling and writing
(tests/cli/test_watch_signals.py); report takes the folder's lock (tests/cli/test_locks.py); the one reader's
size cap, alias, nesting and surrogate guards (tests/test_reading.py); the API's arguments
(tests/test_api_arguments.py); C0 controls and long words in the report (tests/report/).
"""

from __future__ import annotations

import errno
import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from mcflops import cli, output
from mcflops.cli import signals
from mcflops.output import files

HERE = Path(__file__).resolve().parent
OK = HERE / "bad" / "ok" / "small.yaml"


def one_line(err: str) -> str:
    """The single line a refused input leaves on stderr (no traceback, printable, the program's prefix)."""
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcflops: ") and lines[0].isprintable(), err
    return lines[0]


def call(argv, capsys) -> tuple[int, str]:
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    return rc, capsys.readouterr().err


# ---------------------------------------------------------------------------- a goodput from failures


FAILURES = {  # a bad `goodput: {failures: ...}` block -> a fragment of its one line
    "rate-negative": ("{rate_per_gpu_hour: -1, checkpoint_interval_h: 1, restart_h: 0.2}",
                      "priors.goodput: expected rate_per_gpu_hour > 0, got -1"),
    "rate-interval-reversed": ("{rate_per_gpu_hour: {lognormal: [1e-5, -1e-4]}, checkpoint_interval_h: 1, "
                               "restart_h: 0.2}",
                               "priors.goodput.failures.rate_per_gpu_hour: a 90% interval needs p5 < p95"),
    "rate-text": ("{rate_per_gpu_hour: {lognormal: [x, 1e-4]}, checkpoint_interval_h: 1, restart_h: 0.2}",
                  "expected a number for p5, got the text 'x'"),
    "rate-beta": ("{rate_per_gpu_hour: {beta: [0.1, 0.2]}, checkpoint_interval_h: 1, restart_h: 0.2}",
                  "may be a number, a lognormal or a uniform prior (got beta)"),
    "interval-a-prior": ("{rate_per_gpu_hour: 1e-5, checkpoint_interval_h: {lognormal: [1, 2]}, restart_h: 0.2}",
                         "expected checkpoint_interval_h: a number > 0 (hours)"),
    "two-uncertain": ("{rate_per_gpu_hour: {lognormal: [1e-5, 1e-4]}, checkpoint_interval_h: 1, "
                      "restart_h: {uniform: [0.1, 2]}}", "at most one uncertain input"),
    "unknown-key": ("{rate_per_gpu_hour: {lognormal: [1e-5, 1e-4], weird: 1}, checkpoint_interval_h: 1, "
                    "restart_h: 0.2}",
                    "unknown family or key 'weird'"),
    "source-number": ("{rate_per_gpu_hour: {lognormal: [1e-5, 1e-4], source: 3}, checkpoint_interval_h: 1, "
                      "restart_h: 0.2}", "expected source: to be text"),
    "job-never-finishes": ("{rate_per_gpu_hour: 1, checkpoint_interval_h: 1, restart_h: 0.2}",
                           "training would take forever (goodput underflows to 0)"),
}


@pytest.mark.parametrize("block, fragment", FAILURES.values(), ids=FAILURES)
def test_a_bad_failures_block_names_its_place_once(block, fragment, tmp_path, monkeypatch, capsys):
    """The place (file:line: field) was printed twice ("f.yaml:11: priors.goodput: failures: f.yaml:11:
    priors.goodput: ..."): the inner error, already located, was wrapped in the outer one's prefix."""
    f = tmp_path / "f.yaml"
    f.write_text(OK.read_text().replace("  goodput: {beta: [0.85, 0.97], source: \"made up for tests\"}",
                                        f"  goodput: {{failures: {block}}}"))
    assert "failures:" in f.read_text()
    monkeypatch.chdir(tmp_path)
    rc, err = call(["validate", f], capsys)
    line = one_line(err)
    assert rc == 2 and fragment in line, line
    assert line.count(f"{f}:11:") == 1 and line.count("priors.goodput") == 1, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.yaml"]


# ---------------------------------------------------------------------------- watch's --poll


@pytest.mark.parametrize("poll", ["nan", "inf", "0", "61"])
def test_watch_poll_outside_its_range_is_one_line(poll, tmp_path, monkeypatch, capsys):
    """`--poll nan` passed `poll <= 0 or poll > 60` (both false for NaN) and reached time.sleep: a traceback."""
    monkeypatch.chdir(tmp_path)
    rc, err = call(["watch", OK, "--poll", poll, "--no-report"], capsys)
    assert rc == 2
    assert "--poll: expected a number of seconds in (0, 60]" in one_line(err)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- a full disk


def _disk_full(path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


@pytest.fixture(scope="module")
def result():
    from mcflops import api

    return api.run(OK, samples=1000, posterior=False, sensitivity=False)


def test_a_full_disk_names_the_report_file_not_its_staging_copy(result, tmp_path, monkeypatch):
    """The run folder is written into `.report.tmp-PID-RANDOM/` beside it and swapped in: the message named
    that staging path, which the user never gave and which is gone by the time they read it."""
    from mcflops.errors import SpecError

    out = tmp_path / "report"
    real = Path.write_text

    def full(self, *a, **k):
        if self.name == "summary.json":
            raise _disk_full(self)
        return real(self, *a, **k)

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(SpecError) as e:
        output.write_run(out, result.record, field="--out")
    assert str(e.value) == f"{out}: --out: cannot write {out}/summary.json: No space left on device"
    assert list(tmp_path.iterdir()) == []  # no staging folder, no lock file, no report


def test_a_full_disk_in_an_analysis_folder_names_its_file_and_leaves_no_folder(tmp_path, monkeypatch):
    from mcflops.errors import SpecError

    def full(path, text):  # as replace_text fails: in its staging file beside the target
        raise _disk_full(path.parent / f".{path.name}.tmp-{os.getpid()}-abc")

    monkeypatch.setattr(files, "replace_text", full)
    out = tmp_path / "sens"
    before = list(output.WRITTEN)
    with pytest.raises(SpecError) as e:
        output.write_outputs(out, "sensitivity.json", {"a": 1}, {}, where=str(out))
    assert str(e.value) == f"{out}/sensitivity.json: --out: cannot write: No space left on device"
    assert list(tmp_path.iterdir()) == []  # the folder this call created is gone again
    assert output.WRITTEN == before  # nothing to report as written


def test_an_interrupted_analysis_says_which_files_it_replaced(tmp_path, monkeypatch, capsys):
    """Ctrl-C while `sensitivity --out` writes its figures said "nothing was written" after it had replaced
    sensitivity.json. The signal only sets the flag; the files already begun are finished, and the line lists
    each file replaced, in order."""
    from mcflops.cli import sensitivity
    from mcflops.output import figures

    def fig(name, interrupt=False):
        def draw(path):
            path.write_bytes(name.encode())
            if interrupt:
                signal.raise_signal(signal.SIGINT)  # Ctrl-C while this figure is written

        return draw

    monkeypatch.setattr(sensitivity, "compute", lambda args, bar: {"name": "x", "seed": 1})
    monkeypatch.setattr(figures, "sensitivity", lambda d: {"a.png": fig("a", interrupt=True), "b.png": fig("b")})
    out = tmp_path / "sens"
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # a CI shell may ignore SIGINT
    try:
        rc, err = call(["sensitivity", OK, "--out", out, "--json"], capsys)
    finally:
        signal.signal(signal.SIGINT, before)
    assert rc == 130
    assert one_line(err) == f"mcflops: interrupted after writing {out}/sensitivity.json, {out}/a.png and {out}/b.png"
    assert sorted(p.name for p in out.iterdir()) == ["a.png", "b.png", "sensitivity.json"]


# ---------------------------------------------------------------------------- a writer killed mid-write


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_staging_files_of_a_killed_writer_are_removed_by_the_next(tmp_path):
    """`sensitivity --out` replaces its files one by one through staging files; one killed mid-write left
    `.tornado.png.tmp-RANDOM` that nothing removed. The staging names now carry the writer's PID, and the next
    writer of the folder removes those of dead processes (under the folder's lock); a live writer's stay."""
    out = tmp_path / "sens"
    out.mkdir()
    dead, live = _dead_pid(), os.getppid()
    (out / f".tornado.png.tmp-{dead}-k1ll3d").write_bytes(b"half a png")
    (out / f".sobol.png.tmp-{live}-wr1t1n").write_bytes(b"being written")
    (out / "notes.txt").write_text("the user's\n")
    output.write_outputs(out, "sensitivity.json", {"a": 1}, {}, where=str(out))
    assert sorted(p.name for p in out.iterdir()) == [f".sobol.png.tmp-{live}-wr1t1n", "notes.txt", "sensitivity.json"]


def test_staging_names_carry_the_pid():
    name = files.temp_prefix("report.md", "tmp") + "abc_9"
    assert files.owner(Path(name), "report.md") == os.getpid()
    assert not files.stale(Path(name))  # this process: never someone else's leftover


def test_a_killed_re_render_does_not_make_the_report_irreplaceable(tmp_path):
    """`mcflops report DIR` replaces report.md through a staging file inside DIR; killed there, it left a file a
    report does not hold, and `run --out DIR` then refused the folder as not a report."""
    out = tmp_path / "report"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({k: 1 for k in output.REPORT_KEYS}) + "\n")
    (out / f".report.md.tmp-{_dead_pid()}-abcd").write_text("# half")
    assert output.not_a_report(out) is None
    (out / ".report.md.tmp-x").write_text("# not a staging name")
    assert "holds '.report.md.tmp-x'" in output.not_a_report(out)


# `mcflops run` touching MARKER when it reaches POINT and stalling or going on there: "claimed" (it holds the
# folder's lock, JAX not yet set up), "sampling" (its first engine block), "writing" (the run folder's writer,
# output.write_run as `run` calls it, with its staging folder made: a cheap result, no posterior and no
# analysis, keeps this child short)
CHILD_AT = r"""
import os, sys, time
from pathlib import Path
marker, point = Path(os.environ["MARKER"]), os.environ["POINT"]
if point == "writing":
    from mcflops import api, output
    from mcflops.output import folder
    res = api.run(sys.argv[2], samples=1000, posterior=False, sensitivity=False)
    def stall(tmp):
        marker.touch()
        time.sleep(600)
    folder.run_files = lambda res: ([stall], [])
    output.write_run(Path(sys.argv[4]), res.record)
from mcflops.cli import progress, session
if point == "claimed":
    claim = session.Session.claim_out
    def claimed(self, out):
        claim(self, out)
        marker.touch()
        time.sleep(600)
    session.Session.claim_out = claimed
elif point == "sampling":
    check = progress.check_interrupt
    def reached():
        marker.touch()
        check()
    progress.check_interrupt = reached
sys.argv[0] = "mcflops"
from mcflops.cli import main
sys.exit(main())
"""


def test_nothing_is_left_in_tmp_after_a_sigkill_once_the_next_run_has_started(tmp_path, monkeypatch, capsys,
                                                                              jax_cache_env):
    """SIGKILL `mcflops run` once it holds its folder, while it samples and while it writes the folder (three
    processes side by side, each into its own folder, with a private TMPDIR); then start the next run into each
    folder. Nothing is left in TMPDIR, and beside the folders neither a staging folder nor a lock file.
    (Figures were once drawn in /tmp/mcflops-figures-*, which nothing removed after a SIGKILL.)"""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    spec = tmp_path / "long.yaml"
    spec.write_text(OK.read_text().replace("samples: 5000", "samples: 1e10"))
    short = tmp_path / "short.yaml"
    short.write_text(OK.read_text().replace("samples: 5000", "samples: 1000"))
    procs = {}
    for point in ("claimed", "sampling", "writing"):
        env = {**os.environ, **jax_cache_env, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent),
               "TMPDIR": str(tmpdir), "MARKER": str(tmp_path / f"at-{point}"), "POINT": point}
        args = ["run", short if point == "writing" else spec, "--out", tmp_path / point, "--quiet"]  # argv[1:]
        procs[point] = subprocess.Popen([sys.executable, "-c", CHILD_AT, *map(str, args)], env=env, cwd=tmp_path,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        for point, proc in procs.items():
            while not (tmp_path / f"at-{point}").exists():
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                assert time.monotonic() < deadline, f"the child never reached {point}"
                time.sleep(0.02)
            proc.kill()
            proc.wait()
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stderr.close()
    debris = {p.name.split("-")[0] for p in tmp_path.iterdir() if p.name.startswith(".")}
    assert debris == {".claimed.lock", ".sampling.lock", ".writing.lock", ".writing.tmp"}  # what the kills left

    # the next run into each folder: it stops at its first stage, after it has taken the folder
    from mcflops.cli import run as run_command

    def stop():
        raise signals.Interrupted(signal.SIGTERM)

    monkeypatch.setattr(run_command, "setup_jax", stop)
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    for point in procs:
        assert cli.main(["run", str(short), "--out", str(tmp_path / point), "--quiet"]) == 143
    capsys.readouterr()
    assert list(tmpdir.iterdir()) == []
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("."))
    assert left == [], left


# ---------------------------------------------------------------------------- signals


EARLY_CHILD = r"""
import os, runpy, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a suite started in the background ignores SIGINT
sig = getattr(signal, os.environ["SIG"])
sys.orig_argv = [sys.executable, "-m", "mcflops.cli", *sys.argv[1:]]  # the command line the program has
def hook(event, args):
    if event == "import" and args[0] == "mcflops.spec" and not getattr(hook, "fired", False):
        hook.fired = True
        signal.raise_signal(sig)  # lands while mcflops.cli imports its modules, before main() has started
sys.addaudithook(hook)
sys.argv[0] = "mcflops"
runpy.run_module("mcflops.cli", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_signal_while_the_program_loads_is_one_line(sig, code, word, tmp_path):
    """A Ctrl-C in the first fifth of a second, while `mcflops` imports its modules, was a KeyboardInterrupt
    traceback from inside an import (SIGTERM killed it silently): it is now noted from the first line of
    mcflops.cli on and the command stops before it starts."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent), "SIG": sig.name}
    p = subprocess.run([sys.executable, "-c", EARLY_CHILD, "run", str(OK), "--out", str(tmp_path / "out")],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert p.returncode == code, p.stderr[-2000:]
    assert one_line(p.stderr) == f"mcflops: {word}; nothing was written"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, program", [
    (["python3", "-m", "mcflops.cli", "run", "f.yaml"], True),
    (["python3", "-X", "importtime", "-I", "-m", "mcflops.cli"], True),
    (["/venv/bin/python3", "/venv/bin/mcflops", "run", "f.yaml"], True),
    (["python3", "-c", "import mcflops.cli"], False),
    (["python3", "-m", "pytest", "tests"], False),
    (["python3", "notebook.py", "mcflops"], False),
    (["python3"], False),
])
def test_only_the_program_notes_early_signals(argv, program, monkeypatch):
    """A library or a test importing mcflops.cli keeps Python's Ctrl-C: only the program defers it."""
    monkeypatch.setattr(sys, "orig_argv", argv)
    assert signals._program() is program


def test_a_second_signal_swallowed_by_a_gc_callback_is_sent_again():
    """The second Ctrl-C raises at once, wherever the main thread is; in a garbage-collection callback (JAX
    has one) Python prints "Exception ignored" and drops it, and a stage without checks (a NUTS fit) ran on.
    The command's unraisable hook now sends it again 50 ms later, into ordinary code."""
    state = {"armed": False, "swallowed": False, "at": None}

    def callback(phase, info):
        if phase == "start" and state["armed"]:
            state["armed"], state["swallowed"], state["at"] = False, True, time.monotonic()
            signal.raise_signal(signal.SIGINT)
            time.sleep(0)  # a call: the pending handler runs here, inside the callback

    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    gc.callbacks.append(callback)
    t0 = time.monotonic()
    try:
        with pytest.raises(signals.Interrupted):
            with signals.interrupts():
                signal.raise_signal(signal.SIGINT)  # the first: a flag, checked between stages
                state["armed"] = True
                # a stage with no check in it: left alone it runs 60 s, far past the re-send's 50 ms
                while time.monotonic() - t0 < 60:
                    if not state["swallowed"]:
                        gc.collect()  # until the callback has swallowed the second signal; then plain work
                    sum(range(1000))
        took = time.monotonic() - state["at"]
    finally:
        gc.callbacks.remove(callback)
        signal.signal(signal.SIGINT, before)
    assert state["swallowed"]
    # timed from the swallowing, not from the start: the gc.collect() calls before it take seconds on a loaded
    # machine (a worker's heap holds JAX's objects); 5 s is 100x the re-send's delay, 60 s the stage left alone
    assert took < 5, f"ran on for {took:.1f} s after the second signal was swallowed"
    assert sys.unraisablehook is not signals._unraisable  # the hook is put back after the command


# ---------------------------------------------------------------------------- numerical warnings


def test_overflowed_shapley_sums_give_their_effects_without_a_warning():
    """An output spread over tens of orders of magnitude (params and tokens 1e30, an MFU beta over [0.001,
    0.999]) overflowed the delta method's matrix product: NumPy's "invalid value encountered in matmul" on
    stderr. The effects are the closed form c(i) / Var(Y); pytest turns any warning into an error here."""
    from mcflops.analysis.shapley import shapley_effects

    n, q = 10.0, np.array([1.0, 2.0, 4.0])  # c(a), c(b), Var(Y): their means are finite, their squares' sums not
    sums = {"n": n, "names": ("a", "b"), "s": (n * q)[None, :], "ss": np.full((1, 3, 3), np.inf)}
    out = shapley_effects(sums)
    np.testing.assert_allclose(out["effect"], [0.25, 0.5], rtol=1e-15)
    assert np.all(np.isnan(out["se"]) | (out["se"] >= 0))


def test_absurd_but_valid_values_print_no_library_warning(tmp_path, jax_cache_env):
    """params and tokens as lognormals spanning 27 and 13 orders of magnitude: the prior's exact moments
    overflow; the tables show n/a for them, and stderr holds no RuntimeWarning (the program's own filter)."""
    f = tmp_path / "absurd.yaml"
    f.write_text(OK.read_text().replace("params: 8.0e9", "params: {lognormal: [1e3, 1e30]}")
                 .replace("tokens: {lognormal: [1.4T, 1.6T]", "tokens: {lognormal: [1e3, 1e16]")
                 .replace("samples: 5000", "samples: 1000"))
    env = {**os.environ, **jax_cache_env, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent)}
    env.pop("PYTHONWARNINGS", None)
    p = subprocess.run([sys.executable, "-m", "mcflops.cli", "sample", str(f), "--json"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stderr == ""
    assert json.loads(p.stdout)["prior"]["gpu_hours"]["sd"] is None  # the overflow is there, shown as null


# ---------------------------------------------------------------------------- a summary.json mcflops did not write


def test_a_lone_surrogate_in_summary_json_is_one_line_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "report"
    out.mkdir()
    summary = {"name": "x\ud800", "seed": 1, "samples": 1000, "spec_hash": "0", "version": "0"}
    (out / "summary.json").write_text(json.dumps(summary))  # json.dumps escapes it: \ud800
    rc, err = call(["report", out], capsys)
    assert rc == 2
    assert "lone surrogate" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]


# ---------------------------------------------------------------------------- configs


MIXTRAL = json.loads((HERE.parent / "priors" / "examples" / "mixtral-8x7b" / "config.json").read_text())
DEEPSEEK_V2 = {"model_type": "deepseek_v2", "num_hidden_layers": 60, "hidden_size": 5120, "num_attention_heads": 128,
               "num_key_value_heads": 128, "intermediate_size": 12288, "moe_intermediate_size": 1536,
               "n_routed_experts": 160, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
               "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
               "v_head_dim": 128, "vocab_size": 102400}


@pytest.mark.parametrize("base, change, field", [
    (DEEPSEEK_V2, {"first_k_dense_replace": 100}, "first_k_dense_replace"),  # printed "-388.6B parameters"
    (MIXTRAL, {"num_experts_per_tok": 9}, "num_experts_per_tok"),  # "53.13B active of 47.49B total"
    (MIXTRAL, {"intermediate_size": 0}, "intermediate_size"),  # counted as 4 x d_model
    (MIXTRAL, {"num_attention_heads": 0}, "num_attention_heads"),  # ZeroDivisionError
], ids=["dense-layers-above-layers", "active-above-experts", "zero-ffn", "zero-heads"])
def test_a_config_that_cannot_be_is_one_line_from_the_command_line(base, change, field, tmp_path, capsys):
    """`mcflops arch config.json` (the API's checks are tests/arch/test_hf.py's): exit 2, one line naming the
    file and the field."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**base, **change}))
    rc, err = call(["arch", p], capsys)
    assert rc == 2
    line = one_line(err)
    assert field in line and str(p) in line, line
    assert list(tmp_path.iterdir()) == [p]
