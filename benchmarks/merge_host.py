"""Host time of the engine's merge, per 1e10 draws: the part of a pass that a faster device cannot shorten.

    .venv/bin/python benchmarks/merge_host.py            # 1e8 draws, prior and posterior pass
    .venv/bin/python benchmarks/merge_host.py --n 1e7    # quicker, noisier

An ordinary ``engine.run`` of the benchmark model (``bench.SPEC``; with ``bench.OBSERVE`` for the posterior
pass) records what it gives the merge object (``engine.merge._Merge``: its construction and every ``add``
call, with the outputs the device returned); the merge is then timed alone, replayed from that record with
nothing else running (the least of ``--repeats`` replays). The total is scaled by the block count: 1e10 draws are 9,537 blocks of 2^20, so
host seconds per 1e10 draws = timed seconds x 9,537 / (blocks of the timed run). Target: at most 0.1 s for
both passes (benchmarks/RESULTS.md, "GPU").
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


def _replay(cls, log: list, orig: dict) -> float:
    """Seconds to redo the recorded merges on fresh objects, the final fold (``exact``) included, with no
    device work in flight: on a CPU the device's threads would otherwise compete with the host for the
    same cores, which a GPU's would not."""
    t = time.perf_counter()
    for a, k, calls in log:
        m = cls.__new__(cls)
        orig["__init__"](m, *a, **k)
        for name, ca, ck in calls:
            orig[name](m, *ca, **ck)
        m.exact()
    return time.perf_counter() - t


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e8, help="draws per timed run (default 1e8)")
    p.add_argument("--repeats", type=int, default=5, help="replays per pass; the least time is kept")
    args = p.parse_args(argv)
    n = int(args.n)

    import jax

    import bench
    import mcflops
    from mcflops import engine, model
    from mcflops.engine import merge

    engine.setup()
    log, orig = _recorded(merge._Merge)
    blocks = -(-n // engine.BLOCK)
    scale = -(-10**10 // engine.BLOCK) / blocks
    print(f"# {jax.device_count()} {jax.devices()[0].platform} device(s); {n:,d} draws = {blocks} blocks; "
          f"scaled x{scale:.1f} to 1e10 draws")
    for label, observe in (("prior pass", {}), ("posterior pass", bench.OBSERVE)):
        spec = mcflops.load_spec({**bench.SPEC, "observe": observe})
        m = model.build_model(spec)
        lik = engine.build_likelihood(spec, m)
        engine.run(jax.random.key(0), m, lik, engine.BLOCK)  # compile
        log.clear()
        t = time.perf_counter()
        engine.run(jax.random.key(0), m, lik, n)
        wall = time.perf_counter() - t
        best = min(_replay(merge._Merge, log, orig) for _ in range(args.repeats))
        print(f"{label:16s} host merge {best * 1e3:8.2f} ms of {wall:6.2f} s wall; "
              f"per 1e10 draws {best * scale:7.3f} s (target <= 0.1 s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
