"""One paper held out of the layout fit, refitted with and without the attention core's term
(:func:`mcflops.layout.compute.attention_slowdown`), and its rows scored by their share of attention FLOPs.

    .venv/bin/python benchmarks/attention_fold.py [--paper llm-foundry] [--chains 2] [--draws 150] [--attention on]

llm-foundry and torchtitan are the papers whose rows run at long context (their attention core is up to 83% and 82%
of a row's FLOPs; every other paper's rows stay under 13%). Prints per fit the held-out 90% coverage, median |log error|,
median p95/p5, the correlation of the log error with the attention share and its mean by share band, and the
attention term's posterior for each group the fit measures (mcflops.layoutfit.mix.contrast_groups). About 3 minutes per fit on 2 cores at the defaults (the held-out
validation's budget, ``mcflops calibrate --layout --holdout``).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

BANDS = ((0.0, 0.1), (0.1, 0.3), (0.3, 0.6), (0.6, 1.0))


def fold(rs, held, attention: bool, chains: int, draws: int) -> None:
    import numpy as np

    from mcflops.layoutfit import fit as lf, holdout as lh

    f = lf.fit(rs, seed=0, chains=chains, warmup=draws, draws=draws, max_tree_depth=10, held=held, attention=attention)
    print(f"attention term {'on' if attention else 'off'}: R-hat {f.r_hat_max:.3f}, ESS {f.ess_min:.0f}, "
          f"{f.divergences} divergences, {f.seconds:.0f} s")
    for k, g in enumerate(f.data.attention_groups):  # the groups whose fitted rows measure it (mix.contrast_groups)
        a = 1 / (1 + np.exp(-f.samples["logit_attention"][:, k]))
        print(f"  attention relative to the GEMMs, {g}, posterior 5/50/95%: " +
              " / ".join(f"{q:.2f}" for q in np.quantile(a, [0.05, 0.5, 0.95])))
    got = [(r, *lh.predict(f, r)) for r in rs if r.id in held]
    y = np.array([g[0].y for g in got])
    p5, p50, p95 = (np.array([g[i] for g in got]) for i in (1, 2, 3))
    share = np.array([g[0].terms.attn for g in got])
    err, inside = np.log(y / p50), (p5 <= y) & (y <= p95)
    print(f"  {len(got)} rows: coverage {inside.mean():.2f}, median |log error| {np.median(abs(err)):.3f}, "
          f"median p95/p5 {np.median(p95 / p5):.2f}; corr(log error, attention share) {np.corrcoef(err, share)[0, 1]:+.2f}")
    for lo, hi in BANDS:
        m = (share >= lo) & (share < hi)
        if m.any():
            print(f"  share [{lo:.1f}, {hi:.1f}): {m.sum():3d} rows, mean log error {err[m].mean():+.3f}, "
                  f"coverage {inside[m].mean():.2f}")


def main() -> int:
    from mcflops.layoutfit import fit as lf, holdout as lh
    from mcflops.layoutfit.data import benchmark_rows

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper", default="llm-foundry")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--draws", type=int, default=150)
    ap.add_argument("--attention", choices=("both", "on", "off"), default="both", help="which fits to run")
    a = ap.parse_args()
    rs = lf.rows(benchmark_rows())
    held = tuple(r.id for r in rs if lh.group_of("paper", r) == a.paper)
    if not held:
        raise SystemExit(f"attention_fold: no benchmark rows of paper {a.paper!r}")
    for attention in {"both": (False, True), "on": (True,), "off": (False,)}[a.attention]:
        fold(rs, held, attention, a.chains, a.draws)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
