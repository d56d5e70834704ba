"""A prior file's parse kept in the host results (spec.reader.read_yaml through mcflops.diskcache): every prior file
and every bad input loads to the same Spec, or fails with the same one line, with the store on as off, the
second time as the first; a bad edit of a file whose good version was kept is named with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcflops.errors import SpecError
from mcflops import diskcache
from mcflops.spec import load_spec, resolved_dict

ROOT = Path(__file__).resolve().parent.parent.parent
FILES = sorted((ROOT / "priors").glob("*.yaml")) + sorted((ROOT / "tests" / "bad").rglob("*.yaml"))


def _outcome(path: Path) -> tuple[str, object]:
    try:
        spec = load_spec(path)
    except SpecError as e:
        return "error", str(e)
    return spec.digest(), resolved_dict(spec)


@pytest.fixture
def store(tmp_path):
    diskcache.use(tmp_path / "cache")
    yield tmp_path / "cache" / "host"
    diskcache.stop()


def test_every_file_loads_alike_from_the_store(store):
    diskcache.stop()
    fresh = {p: _outcome(p) for p in FILES}
    diskcache.use(store.parent)
    first = {p: _outcome(p) for p in FILES}
    assert any(store.glob("*.pkl"))  # kept
    again = {p: _outcome(p) for p in FILES}
    assert first == fresh and again == fresh
    assert sum(o[0] == "error" for o in fresh.values()) > 50 and sum(o[0] != "error" for o in fresh.values()) >= 10


def _line(path: Path, start: str) -> int:
    return next(i for i, t in enumerate(path.read_text().splitlines(), 1) if t.lstrip().startswith(start))


@pytest.mark.parametrize("edit, expect", [
    (lambda t: t.replace("count: 16384", "count: -3", 1), "count"),  # a value out of range
    (lambda t: t.replace("count: 16384", "count: 16384: 2", 1), "YAML syntax error"),  # a broken line
])
def test_a_bad_edit_of_a_kept_file_names_its_line(store, tmp_path, monkeypatch, edit, expect):
    from mcflops.spec import reader

    path = tmp_path / "llama405b.yaml"
    good = (ROOT / "priors" / "llama405b.yaml").read_text()
    assert "count: 16384" in good
    path.write_text(good)
    load_spec(path)
    with monkeypatch.context() as m:
        m.setattr(reader, "parse_yaml", lambda *a: pytest.fail("parsed again"))
        load_spec(path)  # now read back from the store
    line = _line(path, "count:")
    path.write_text(edit(good))
    with pytest.raises(SpecError) as e:
        load_spec(path)
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg and expect in msg and e.value.line == line, msg
    path.write_text(good)  # and the good version again: read back, the same Spec
    assert resolved_dict(load_spec(path)) == resolved_dict(load_spec(ROOT / "priors" / "llama405b.yaml"))
