"""Where the test suite's CPU goes: a pytest plugin that records, per test, its wall seconds, the CPU seconds of
its process and of the processes it waited for, and the seconds JAX spent tracing, lowering and compiling
(jax.monitoring's events; compiles in threads overlap, so they can add up to more than the wall). Each process
(each xdist worker) writes ``$SUITE_CPU_OUT.<worker>.tsv``; run this file to sum them by file and by test.

    XDG_CACHE_HOME=$(mktemp -d) PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/suite \\
      .venv/bin/python -m pytest -n 2 -q -p suite_cpu
    .venv/bin/python benchmarks/suite_cpu.py /tmp/suite 30
"""

from __future__ import annotations

import collections
import glob
import os
import resource
import sys
import time

COLUMNS = ("wall", "self_cpu", "child_cpu", "compile", "compiles", "trace", "lower")
_EVENTS = {"compile": "/jax/core/compile/backend_compile_duration", "trace": "/jax/core/compile/jaxpr_trace_duration",
           "lower": "/jax/core/compile/jaxpr_to_mlir_module_duration"}
_seconds: collections.Counter = collections.Counter()
_counts: collections.Counter = collections.Counter()
_rows: list[tuple] = []


def _listen(event: str, duration: float, **_) -> None:
    _seconds[event] += duration
    _counts[event] += 1


def _cpu() -> tuple[float, float]:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def pytest_configure(config) -> None:
    import jax.monitoring

    jax.monitoring.register_event_duration_secs_listener(_listen)


def _hookwrapper(fn):
    import pytest

    return pytest.hookimpl(wrapper=True)(fn)


@_hookwrapper
def pytest_runtest_protocol(item, nextitem):
    (a0, b0), w0 = _cpu(), time.perf_counter()
    s0, n0 = dict(_seconds), dict(_counts)
    try:
        return (yield)
    finally:
        (a1, b1), w1 = _cpu(), time.perf_counter()
        d = {k: _seconds[e] - s0.get(e, 0.0) for k, e in _EVENTS.items()}
        _rows.append((item.nodeid, w1 - w0, a1 - a0, b1 - b0, d["compile"],
                      _counts[_EVENTS["compile"]] - n0.get(_EVENTS["compile"], 0), d["trace"], d["lower"]))


def pytest_sessionfinish(session) -> None:
    out = os.environ.get("SUITE_CPU_OUT")
    if out:
        with open(f"{out}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.tsv", "w") as f:
            f.writelines("\t".join(map(str, r)) + "\n" for r in _rows)


def main(prefix: str, top: int = 30) -> None:
    rows = []
    for path in sorted(glob.glob(prefix + ".*.tsv")):
        with open(path) as f:
            rows += [(t[0], *map(float, t[1:])) for t in (line.rstrip("\n").split("\t") for line in f)]
    total = [sum(r[i] for r in rows) for i in range(1, len(COLUMNS) + 1)]
    print(f"{len(rows)} tests: " + ", ".join(f"{c} {v:.1f}" for c, v in zip(COLUMNS, total)))
    by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0.0] * len(COLUMNS))
    for r in rows:
        acc = by_file[r[0].split("::")[0]]
        for i, v in enumerate(r[1:]):
            acc[i] += v
    cpu = lambda v: v[1] + v[2]  # noqa: E731
    print("\nby file, most CPU first: " + " ".join(COLUMNS))
    for name, v in sorted(by_file.items(), key=lambda kv: -cpu(kv[1]))[:top]:
        print(" ".join(f"{x:7.1f}" for x in v), name)
    print("\nby test, most CPU first: " + " ".join(COLUMNS))
    for r in sorted(rows, key=lambda r: -cpu(r[1:]))[:top]:
        print(" ".join(f"{x:7.1f}" for x in r[1:]), r[0])


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
