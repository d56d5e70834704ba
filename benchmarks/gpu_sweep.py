"""Where a GPU's time goes in the engine's passes: the prior and the posterior pass at one size (default 1e9 draws)
for several call shapes, each timed warm (the first run compiles), in one process.

    python benchmarks/gpu_sweep.py --json sweep.json [--n 1e9] [--dry-run]

The shapes: histogram copies (``engine.GPU_HIST_COPIES``: the scatter-adds spread over copies of each histogram)
1, 8, 32 and 128 at the default batch, and batches of 4 and 16 blocks at the default copies. ``--dry-run``: tiny
sizes on whatever device there is, a check of the script.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=float, default=1e9)
    p.add_argument("--json")
    p.add_argument("--dry-run", action="store_true")
    args = p.parse_args()
    import jax

    from mcflops import engine
    from mcflops.engine import driver

    import gpu_checks

    engine.setup()
    n = 1 << 18 if args.dry_run else int(args.n)
    size = {"size": 1 << 15, "sub": 1 << 12} if args.dry_run else {}
    out = {"n": n, "device": str(jax.devices()[0]), "jax": jax.__version__, "default_batch": engine.GPU_BATCH,
           "default_copies": engine.GPU_HIST_COPIES, "rows": []}
    shapes = [{"copies": c} for c in (1, 8, 32, 128)] + [{"batch": b} for b in (4, 16)]
    batch, copies = driver._batch, driver._copies
    for shape in shapes:
        b, c = shape.get("batch", engine.GPU_BATCH), shape.get("copies", engine.GPU_HIST_COPIES)
        driver._batch, driver._copies = (lambda b=b: b), (lambda c=c: c)
        row = {**shape, "batch": b, "copies": c}
        for posterior in (False, True):
            m, lik = gpu_checks._model(posterior)
            try:
                dt = float("inf")
                for _ in range(3):  # the first run compiles
                    t = time.perf_counter()
                    engine.run(jax.random.key(0), m, lik, n, **size)
                    dt = min(dt, time.perf_counter() - t)
                row["posterior" if posterior else "prior"] = {"seconds": dt, "draws_per_s": n / dt}
            except Exception as e:  # a shape that fails must not cost the others
                row["posterior" if posterior else "prior"] = {"error": f"{type(e).__name__}: {e}"}
        driver._batch, driver._copies = batch, copies
        out["rows"].append(row)
        cells = [f"{k} {row[k]['draws_per_s'] / 1e9:6.2f} G/s" if "draws_per_s" in row[k] else f"{k} {row[k]['error']}"
                 for k in ("prior", "posterior") if k in row]
        print(f"batch {b:3d} copies {c:4d}  "
              + "   ".join(cells), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
