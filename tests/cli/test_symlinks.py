"""Nothing outside the output folder is written: links planted in a shared report folder at the names
temporary files once had (from the process id) or at any other guessable name do not redirect a
write. Every command that writes into a folder is tried with a victim file behind the links. What is
written gets the modes the umask gives, as any new file or folder (not the temporary files' 0600/0700)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcflops import cli

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
PRECIOUS = b"precious, not a report\n"


def plant(folder: Path, names, victim: Path) -> list[Path]:
    """Symbolic links to ``victim`` at every temporary name an older mcflops used for ``names`` (and the
    plain guessable ones), for this process id and the next few."""
    folder.mkdir(parents=True, exist_ok=True)
    links = []
    for pid in range(os.getpid(), os.getpid() + 4):
        for name in names:
            stem, dot, suffix = name.partition(".")
            for planted in (f".{stem}.tmp-{pid}{dot}{suffix}", f".{name}.tmp-{pid}", f".{name}.tmp", f"{name}.tmp"):
                link = folder / planted
                if not link.is_symlink():
                    link.symlink_to(victim)
                    links.append(link)
    return links


@pytest.fixture()
def victim(tmp_path):
    v = tmp_path / "victim.txt"
    v.write_bytes(PRECIOUS)
    return v


def untouched(victim: Path, links) -> None:
    assert victim.read_bytes() == PRECIOUS
    assert all(link.is_symlink() and link.resolve() == victim.resolve() for link in links)


def test_report_rerender_does_not_follow_planted_links(tmp_path, victim, capsys):
    out = tmp_path / "shared" / "report"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    links = plant(out, ["report.md", "report.html"], victim)
    (out / "report.md").unlink()
    assert cli.main(["report", str(out)]) == 0
    capsys.readouterr()
    untouched(victim, links)
    assert (out / "report.md").is_file() and not (out / "report.md").is_symlink()
    assert (out / "report.md").stat().st_mode & 0o777 == 0o666 & ~_umask()  # as any new file


def test_run_swap_does_not_use_a_planted_old_folder(tmp_path, victim, capsys):
    shared = tmp_path / "shared"
    out = shared / "report"
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_bytes(PRECIOUS)
    links = []
    for pid in range(os.getpid(), os.getpid() + 4):
        (shared / f".report.old-{pid}").symlink_to(elsewhere)
        links.append(shared / f".report.old-{pid}")
    assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    capsys.readouterr()
    assert (elsewhere / "keep.txt").read_bytes() == PRECIOUS
    assert all(link.is_symlink() for link in links)
    assert sorted(p.name for p in shared.iterdir()) == sorted(["report", *(p.name for p in links)])


@pytest.mark.parametrize("command, name", [
    (["plan", str(OK), "--samples", "2000", "--deadline-days", "60"], "plan.json"),
    (["sensitivity", str(OK), "--samples", "2000"], "sensitivity.json"),
    (["compare", str(OK), str(OK), "--samples", "2000"], "compare.json"),
])
def test_out_files_do_not_follow_planted_links(command, name, tmp_path, victim, capsys):
    out = tmp_path / "shared"
    links = plant(out, [name], victim)
    assert cli.main([*command, "--out", str(out), "--quiet", "--json"]) == 0
    capsys.readouterr()
    untouched(victim, links)
    assert (out / name).is_file() and not (out / name).is_symlink()
    pngs = [p.name for p in out.glob("*.png")]
    links += plant(out, [*pngs, name, "report.md", "report.html"], victim)  # now the figures' names are known too
    assert cli.main([*command, "--out", str(out), "--quiet", "--json"]) == 0
    capsys.readouterr()
    untouched(victim, links)
    left = {p.name for p in out.iterdir()} - {link.name for link in links}
    pages = {"report.md", "report.html"} if name == "compare.json" else set()  # compare writes a report too
    assert left == {name, *pngs, *pages}  # no temporary file left behind


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_run_folder_gets_the_umask_not_0700(tmp_path, capsys):
    out = tmp_path / "report"
    old = os.umask(0o022)
    try:
        assert cli.main(["run", str(OK), "--out", str(out), "--quiet", "--json"]) == 0
    finally:
        os.umask(old)
    capsys.readouterr()
    assert out.stat().st_mode & 0o777 == 0o755
    assert (out / "summary.json").stat().st_mode & 0o777 == 0o644
