"""The layout fit on every benchmark row, with and without the attention core's term, and what each says about the
held-out production rows and the long-context rows it was fitted to.

    .venv/bin/python benchmarks/attention_production.py [--chains 2] [--draws 150]

For each fit: R-hat, ESS (and the four sites that mix worst), each measured attention group's posterior
(mcflops.layoutfit.mix.contrast_groups), each production row's prior median and 90% interval in its own convention
against the published MFU (the shipped priors' check, mcflops.layoutfit.validate.production, at this fit), and the
in-sample posterior medians of the rows of a sequence-length sweep (series whose rows differ in sequence length:
torchtitan's context-parallel tables). About 2.5 minutes per fit on 2 cores at the defaults, a quick budget: the
shipped fit runs 4 x 1000 draws.
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def report(attention: bool, chains: int, draws: int) -> None:
    import numpy as np

    from mcflops.layoutfit import fit as lf, validate as lv

    rs = lf.rows()
    f = lf.fit(rs, seed=0, chains=chains, warmup=draws, draws=draws, attention=attention)
    print(f"attention term {'on' if attention else 'off'}: {len(rs)} rows, R-hat {f.r_hat_max:.3f}, "
          f"ESS {f.ess_min:.0f}, {f.divergences} divergences, {f.seconds:.0f} s")
    worst = sorted(f.summary.items(), key=lambda kv: -kv[1]["r_hat"])[:4]  # where a longer run has to mix
    print("  the worst-mixed sites (R-hat, ESS; a vector site's worst element): "
          + ", ".join(f"{k} {v['r_hat']:.3f}, {v['ess']:.0f}" for k, v in worst))
    for k, g in enumerate(f.data.attention_groups if f.attention else ()):
        a = 1 / (1 + np.exp(-f.samples["logit_attention"][:, k]))
        print(f"  a, {g}: 5/50/95% " + " / ".join(f"{q:.3f}" for q in np.quantile(a, [0.05, 0.5, 0.95])))
    prod = lv.production(lv.export(f, "benchmarks/attention_production.py"))
    for p in prod:
        print(f"  {p['id']:26s} published {p['published']:.3f}, median {p['p50']:.3f} "
              f"[{p['p5']:.3f}, {p['p95']:.3f}], {p['error']:+.0%}")
    t = lv.table(prod)
    print(f"  medians within 15%: {t['within_15pct']}/{t['rows']}, covered {t['covered_90']}/{t['rows']}, "
          f"median |error| {t['median_abs_error']:.1%}")
    seqs: dict[str, set] = {}
    for r in rs:
        seqs.setdefault(r.series, set()).add(r.unit.rsplit("|", 1)[1])
    for r in rs:
        if len(seqs[r.series]) > 1 and r.stack != "llm-foundry":  # llm-foundry's 216: attention_fold.py
            print(f"  in sample {r.id:34s} A {r.terms.attn:.2f}: measured {r.y:.3f}, "
                  f"model median {np.median(lf.row_draws(f, r)):.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--draws", type=int, default=150)
    ap.add_argument("--attention", choices=("both", "on", "off"), default="both", help="which fits to run")
    a = ap.parse_args()
    for attention in {"both": (False, True), "on": (True,), "off": (False,)}[a.attention]:
        report(attention, a.chains, a.draws)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
