"""The MLPerf Training GPT-3 175B rows of layout_runs.yaml, predicted by the shipped layout priors for a new stack.

    nice .venv/bin/python benchmarks/mlperf_heldout.py [--out FILE.json]

The rows (series ``mlperf-v*-gpt3``) are in the shipped fit since its 2026-12-04 refit, so these priors have seen
them through the fit's population (a new stack's draws): held out, they are the ``mlperf-training`` paper-out fold
of ``mcflops calibrate --layout --holdout`` (benchmarks/RESULTS.md, "Held-out series"). Each is predicted through
the prior-file path (:func:`mcflops.layoutfit.validate.held_out`,
the production rows' check without needing a fitted family), in the row's convention (Narayanan et al. 2021 model
FLOPs over the dense FP8 peak). Prints one markdown line per row (measured MFU, the prior's p5 / p50 / p95, p50
over measured, whether the 90% interval covers) and, over the H100 rows, the 90% coverage, the median |log(p50 /
measured)| and the median p95/p5.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", help="also write the rows as JSON here")
    a = p.parse_args(argv)

    import importlib.resources

    import numpy as np

    from mcflops.layoutfit.data import load_layout_runs
    from mcflops.layoutfit.validate import held_out, to_json

    fit_json = json.loads(importlib.resources.files("mcflops").joinpath("data", "layout_fit.json").read_text("utf-8"))
    runs = [r for r in load_layout_runs() if r.series.startswith("mlperf-")]
    rows = held_out(fit_json, runs)
    print("| row | GPUs | measured MFU | p5 | p50 | p95 | p50 / measured | covered |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        tag = "" if r["fit"] else " (fit: false)"
        print(f"| {r['id'].removeprefix('mlperf-')}{tag} | {r['count']:,} | {r['measured']:.3f} | {r['p5']:.3f} | "
              f"{r['p50']:.3f} | {r['p95']:.3f} | {r['ratio']:.2f} | {'yes' if r['covered_90'] else 'no'} |")
    h100 = [r for r in rows if r["accelerator"] == "h100-sxm"]
    cov = np.mean([r["covered_90"] for r in h100])
    err = np.median([abs(np.log(r["ratio"])) for r in h100])
    width = np.median([r["p95_over_p5"] for r in h100])
    ratio = np.median([r["ratio"] for r in h100])
    print(f"\nH100 rows: {len(h100)}; 90% coverage {cov:.2f}; median |log error| {err:.3f}; median p50/measured "
          f"{ratio:.2f}; median p95/p5 {width:.2f}")
    if a.out:
        with open(a.out, "w", encoding="utf-8") as fh:
            json.dump(to_json(rows), fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
