"""Llama 3 405B's three production rows (Table 4) predicted by the shipped layout priors, twice: with the
virtual-stage count the flagship file assumes (vpp 4) and as the paper states the layout (``schedule:
interleaved`` without a vpp: each count that splits a stage's layers and fits, mixed 1:1).

    .venv/bin/python benchmarks/llama3_as_stated.py

Prints per row the published MFU (PaLM's count), the prior's median and 90% interval in that count, the error of
the median and p95/p5. Targets (the layout issue): medians within 10% of 43% and 41%, p95/p5 <= 2.0.
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
