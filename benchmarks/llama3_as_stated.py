"""Llama 3 405B's three production rows (Table 4) predicted by the shipped layout priors, twice: with the
virtual-stage count the flagship file assumes (vpp 4) and as the paper states the layout (``schedule:
interleaved`` without a vpp: each count that splits a stage's layers and fits, mixed 1:1).

    .venv/bin/python benchmarks/llama3_as_stated.py

Prints per row the published MFU (PaLM's count), the prior's median and 90% interval in that count, the error of
the median and p95/p5. Targets (the layout issue): medians within 10% of 43% and 41%, p95/p5 <= 2.0.

Then what the width is made of: ``priors/llama405b-layout.yaml`` with ``vpp`` unstated and no observation, its MFU
prior's p95/p5 with every efficiency prior drawn, and with each one in turn fixed at its own median (a point
prior), so that the prior whose fixing narrows the interval most is the one the width comes from.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")


def main() -> int:
    from mcflops.layout import load_fit
    from mcflops.layoutfit import validate as lv
    from mcflops.layoutfit.data import production_rows

    fit = json.loads(json.dumps(load_fit()))
    runs = [r for r in production_rows() if r.series == "llama3-405b"]
    arch, lay = lv.PRODUCTION["llama3-405b"]
    unstated = (arch, {k: v for k, v in lay.items() if k != "vpp"} | {"schedule": "interleaved"})
    keys = lv.LAYOUT_KEYS
    for label, override, layout_keys in (("vpp 4 assumed", (arch, lay), keys),
                                         ("vpp unstated", unstated, tuple(k for k in keys if k != "vpp"))):
        saved = lv.PRODUCTION["llama3-405b"], lv.LAYOUT_KEYS
        lv.PRODUCTION["llama3-405b"], lv.LAYOUT_KEYS = override, layout_keys
        try:
            rows = lv.production(fit, runs)
        finally:
            lv.PRODUCTION["llama3-405b"], lv.LAYOUT_KEYS = saved
        print(label)
        for r in rows:
            print(f"  {r['id']:26s} published {r['published']:.3f}  median {r['p50']:.3f} [{r['p5']:.3f}, "
                  f"{r['p95']:.3f}]  {r['error']:+.0%}  p95/p5 {r['p95'] / r['p5']:.2f}")
    width_parts()
    return 0


def width_parts() -> None:
    import copy
    from pathlib import Path

    import numpy as np

    from mcflops.priors.quantiles import ppf
    from mcflops.spec import load_spec
    from mcflops.spec.reader import read_yaml

    doc = json.loads(json.dumps(read_yaml(Path(__file__).resolve().parents[1] / "priors" / "llama405b-layout.yaml")))
    doc.pop("observe", None)
    layout = doc["priors"]["mfu"]["layout"]
    layout.pop("vpp")
    layout["schedule"] = "interleaved"

    def width(d):
        lp = load_spec(d).count_dependent["mfu"]
        lo, mid, hi = np.quantile(lp.factor_draws()["mfu"], [0.05, 0.5, 0.95])
        return lp, mid, hi / lo

    lp, mid, w = width(copy.deepcopy(doc))
    print("the width's parts (priors/llama405b-layout.yaml, vpp unstated, MFU 6nd)")
    print(f"  {'every prior drawn':31s} median {mid:.3f}  p95/p5 {w:.2f}")
    for p, dist in lp.efficiency.items():
        d = copy.deepcopy(doc)
        med = float(ppf(dist, 0.5))
        d["priors"]["mfu"]["efficiency"] = {p: {"point": med, "source": "its median"}}
        _, m, w = width(d)
        print(f"  {p + ' fixed at ' + format(med, '.4g'):31s} median {m:.3f}  p95/p5 {w:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
