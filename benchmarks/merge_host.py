"""Host time of the engine's merge, per 1e10 draws: the part of a pass that a faster device cannot shorten.

    .venv/bin/python benchmarks/merge_host.py            # 1e8 draws, prior and posterior pass
    .venv/bin/python benchmarks/merge_host.py --n 1e7    # quicker, noisier

An ordinary ``engine.run`` of the benchmark model (``bench.SPEC``; with ``bench.OBSERVE`` for the posterior
pass) records what it gives the merge object (``engine.merge._Merge``: its construction and every ``add``
call, with the outputs the device returned); the merge is then timed alone, replayed from that record with
nothing else running (the least of ``--repeats`` replays). 1e10 draws are 9,537 blocks of 2^20, so host
seconds per 1e10 draws = adding seconds x 9,537 / (blocks of the timed run) + the end of each pass (the
last fold and the sorted reads of the tail and the reservoir), which does not grow with the blocks. The
timed run adds its blocks in the groups a 1e10-draw run uses (16 blocks; ``engine.tree.group_size``),
unless ``--own-groups``.
Target: at most 0.1 s for both passes (benchmarks/RESULTS.md, "GPU").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _recorded(cls) -> tuple[list, dict]:
    """Record every merge of a run: the arguments of the object's construction and of each of its ``add``
    calls (``add_call``: one per call of blocks; ``add``: one per block, before the device added groups).
    Returns the log and the original methods."""
    log: list = []
    orig = {name: vars(cls)[name] for name in ("__init__", "add", "add_call") if name in vars(cls)}

    def record_init(self, *a, **k):
        log.append((a, k, []))
        self._log = log[-1][2]
        orig["__init__"](self, *a, **k)

    def recorder(name):
        def record(self, *a, **k):
            self._log.append((name, a, k))
            return orig[name](self, *a, **k)
        return record

    cls.__init__ = record_init
    for name in orig.keys() - {"__init__"}:
        setattr(cls, name, recorder(name))
    return log, orig


def _replay(cls, log: list, orig: dict) -> tuple[float, float]:
    """Seconds to redo the recorded merges on fresh objects with no device work in flight (on a CPU the
    device's threads would otherwise compete with the host for the same cores, which a GPU's would not):
    (the calls' adds, which grow with the blocks; the last fold and the reads of the tail and the reservoir
    at the end of each pass, which do not)."""
    adds = end = 0.0
    for a, k, calls in log:
        t = time.perf_counter()
        m = cls.__new__(cls)
        orig["__init__"](m, *a, **k)
        for name, ca, ck in calls:
            orig[name](m, *ca, **ck)
        t1 = time.perf_counter()
        m.exact()
        adds, end = adds + t1 - t, end + time.perf_counter() - t1
    return adds, end


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e8, help="draws per timed run (default 1e8)")
    p.add_argument("--repeats", type=int, default=5, help="replays per pass; the least time is kept")
    p.add_argument("--own-groups", action="store_true",
                   help="the run's own groups of blocks (default: a 1e10-draw run's, which the figure scales to)")
    args = p.parse_args(argv)
    n = int(args.n)

    import jax

    import bench
    import mcflops
    from mcflops import engine, model
    from mcflops.engine import merge

    engine.setup()
    log, orig = _recorded(merge._Merge)
    from mcflops.engine import tree

    ten = -(-10**10 // engine.BLOCK)
    if not args.own_groups:  # the groups of blocks a 1e10-draw run has, not this run's own (fewer blocks, smaller)
        while tree.group_size(-(-n // engine.BLOCK)) < tree.group_size(ten) and tree.MIN_GROUPS > 1:
            tree.MIN_GROUPS //= 2
    blocks = -(-n // engine.BLOCK)
    scale = -(-10**10 // engine.BLOCK) / blocks
    print(f"# {jax.device_count()} {jax.devices()[0].platform} device(s); {n:,d} draws = {blocks} blocks in groups "
          f"of {tree.group_size(blocks)} (a 1e10-draw run: {tree.group_size(ten)}); scaled x{scale:.1f} to 1e10 draws")
    for label, observe in (("prior pass", {}), ("posterior pass", bench.OBSERVE)):
        spec = mcflops.load_spec({**bench.SPEC, "observe": observe})
        m = model.build_model(spec)
        lik = engine.build_likelihood(spec, m)
        engine.run(jax.random.key(0), m, lik, n)  # compile (the posterior's layout depends on n)
        log.clear()
        t = time.perf_counter()
        engine.run(jax.random.key(0), m, lik, n)
        wall = time.perf_counter() - t
        adds, end = map(min, zip(*(_replay(merge._Merge, log, orig) for _ in range(args.repeats))))
        print(f"{label:16s} host merge {adds * 1e3:7.2f} ms adding + {end * 1e3:5.2f} ms at the end, of {wall:6.2f} s "
              f"wall; per 1e10 draws {adds * scale + end:7.3f} s (target <= 0.1 s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
