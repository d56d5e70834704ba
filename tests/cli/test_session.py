"""The CLI's session (mcflops/cli/session.py): what one command claims (its output folders' locks and the
parents created for them) lives in the session main makes for that call, not in the module: closing one
session lets go of its own claims only, and of all of them."""

import fcntl
import os

from mcflops.cli.session import Session
from mcflops.output.lock import lock_path


def _locked(out) -> bool:
    """Whether some open file holds ``out``'s lock (flock: a second open file conflicts even in this process)."""
    try:
        fd = os.open(lock_path(out), os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_session_lets_go_of_its_own_claims_only(tmp_path):
    out = tmp_path / "made" / "for" / "run"
    a, b = Session(), Session()
    a.claim_out(out)
    assert _locked(out) and (tmp_path / "made" / "for").is_dir()
    b.claim_out(out)  # the lock is re-entrant within a process: both hold it
    b.close()
    assert _locked(out) and b.claimed == [] and len(a.claimed) == 1  # a's claim survives b's close
    a.close()
    assert not _locked(out) and a.claimed == []
    assert not (tmp_path / "made").exists()  # nothing was written: the parents it created are gone


def test_parents_that_hold_a_written_run_are_kept(tmp_path):
    out = tmp_path / "made" / "run"
    s = Session()
    s.claim_out(out)
    out.mkdir()
    (out / "summary.json").write_text("{}")
    s.close()
    assert not _locked(out) and (out / "summary.json").is_file()
