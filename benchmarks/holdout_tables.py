"""Two readings of the held-out layout validation. The paper folds' rows binned by the attention core's share of
their FLOPs: how often each bin's measurement falls below its prior's 5th percentile (5% if the prior is calibrated
there) and above its 95th, and the median of measured over predicted. And the series folds' rows (a series out, its
stack kept) grouped by stack: what a file that names its stack gets on a series the fit never saw.

    .venv/bin/mcflops calibrate --layout --holdout --out DIR
    .venv/bin/python benchmarks/holdout_tables.py DIR/layout_validation.json

The bins are the ones `mcflops.spec.layoutspec.LONG_CONTEXT_NOTE` and `LONG_CONTEXT_WARNING` were chosen from
(benchmarks/RESULTS.md, "Held-out series").
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

BINS = ((0.0, 0.1), (0.1, 0.2), (0.2, 0.4), (0.4, 1.0))


def main() -> int:
    import numpy as np

    from mcflops.layoutfit import fit as lf

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("validation", help="layout_validation.json written by `mcflops calibrate --layout --holdout`")
    a = ap.parse_args()
    with open(a.validation) as fh:
        doc = json.load(fh)
    if "holdout" not in doc:
        print(f"{a.validation}: expected the 'holdout' table of `mcflops calibrate --layout --holdout`",
              file=sys.stderr)
        return 2
    hold = doc["holdout"]
    runs = {r.id: r for r in lf.rows()}  # prepared once: it counts every row's terms
    share = {rid: r.terms.attn for rid, r in runs.items()}
    rows = [r for s in hold["splits"] if s["kind"] == "paper" for r in s["rows"]]
    print("| attention share | rows | below p5 | above p95 | median measured / predicted |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for lo, hi in BINS:
        mine = [r for r in rows if lo <= share[r["id"]] < hi]
        if not mine:
            continue
        y = np.array([r["y"] for r in mine])
        below = np.mean(y < np.array([r["p5"] for r in mine]))
        above = np.mean(y > np.array([r["p95"] for r in mine]))
        ratio = np.median(y / np.array([r["p50"] for r in mine]))
        print(f"| {lo:.1f}-{hi:.1f} | {len(mine)} | {below:.2f} | {above:.2f} | {ratio:.2f} |")
    print()
    by: dict[str, list] = {}
    for r in (r for s in hold["splits"] if s["kind"] == "series" for r in s["rows"]):
        by.setdefault(lf.stack(runs[r["id"]]), []).append(r)
    print("| stack | rows | 90% cov. | med. \\|log err\\| | med. p95/p5 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    rest = [r for name, mine in by.items() if name != "llm-foundry" for r in mine]
    for name, mine in [*sorted(by.items(), key=lambda kv: len(kv[1])), ("all but llm-foundry", rest)]:
        y, p5, p50, p95 = (np.array([r[k] for r in mine]) for k in ("y", "p5", "p50", "p95"))
        print(f"| {name} | {len(mine)} | {np.mean((p5 <= y) & (y <= p95)):.2f} | "
              f"{np.median(np.abs(np.log(y / p50))):.3f} | {np.median(p95 / p5):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
