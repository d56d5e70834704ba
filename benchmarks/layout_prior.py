"""The layout MFU prior's cost: its prior pass against the same file with a hand-set MFU prior, in one process.

    .venv/bin/python benchmarks/layout_prior.py --repeats 8

Two specs, the flagship's (priors/llama405b-layout.yaml) and the same with `mfu: {beta: {mean: 0.40, sd: 0.05}}`;
for each: the load (the layout's MFU table: Latin hypercube over the efficiency priors, the step-time model) and
the engine's prior pass at 1e7 draws (`mcflops.run(..., posterior=False)`), best of the repeats, alternating
so that a busy neighbour slows both alike. Target: the layout's prior pass (load + sampling) <= 1.5x the
hand-set one's.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeats", type=int, default=8)
    p.add_argument("--samples", type=int, default=10_000_000)
    a = p.parse_args(argv)

    import mcflops
    from mcflops.spec import load_spec
    from mcflops.spec.reader import read_yaml
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    raw = read_yaml(root / "priors" / "llama405b-layout.yaml")
    layout = json.loads(json.dumps(raw))
    layout.pop("observe"), layout.pop("reported")
    hand = copy.deepcopy(layout)
    hand["priors"]["mfu"] = {"beta": {"mean": 0.40, "sd": 0.05}}
    best = {"layout": [float("inf")] * 2, "hand": [float("inf")] * 2}
    for name, data in (("layout", layout), ("hand", hand)):  # compile once each
        mcflops.run(load_spec(data), samples=a.samples, posterior=False)
    for _ in range(a.repeats):
        for name, data in (("layout", layout), ("hand", hand)):
            t0 = time.perf_counter()
            spec = load_spec(data)
            t1 = time.perf_counter()
            mcflops.run(spec, samples=a.samples, posterior=False)
            t2 = time.perf_counter()
            best[name] = [min(best[name][0], t1 - t0), min(best[name][1], t2 - t1)]
    lt, ht = sum(best["layout"]), sum(best["hand"])
    print(f"load (s): layout {best['layout'][0]:.3f}, hand-set {best['hand'][0]:.3f}")
    print(f"prior pass at {a.samples:.0e} (s): layout {best['layout'][1]:.3f}, hand-set {best['hand'][1]:.3f}")
    print(f"load + prior pass: layout / hand-set = {lt / ht:.2f} (target <= 1.5); load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
