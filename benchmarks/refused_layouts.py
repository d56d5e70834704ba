"""Every row of mcflops/data/layout_runs.yaml through the prior-file grammar, as a user's file would be: which
layouts that ran does the model refuse? Dense rows by mcflops.layoutfit.validate.layout_prior (production rows with
the settings its check assumes), mixtures of experts by mcflops.layoutfit.moecheck (the whole architecture and what
their sources state). tests/layoutfit/test_data_rows.py and test_moecheck.py run the part of this that a refusal
would come from; this runs all of it.

    .venv/bin/python benchmarks/refused_layouts.py
"""

from __future__ import annotations

import time

from mcflops.errors import SpecError
from mcflops.layout import load_fit
from mcflops.layoutfit import moecheck
from mcflops.layoutfit import validate as lv
from mcflops.layoutfit.data import load_layout_runs


def main() -> None:
    fit = load_fit()
    t = time.perf_counter()
    runs = load_layout_runs()
    refused = []
    for r in runs:
        try:
            if r.moe:
                moecheck.moe_prior(r, fit)
            else:
                arch, lay = lv.PRODUCTION.get(r.series, ({}, {}))
                lv.layout_prior(r, fit, arch or None, lay or None)
        except SpecError as x:
            refused.append((r.id, str(x)))
    print(f"{len(runs)} rows ({sum(r.moe for r in runs)} mixtures of experts), {len(refused)} refused, "
          f"{time.perf_counter() - t:.1f} s")
    for rid, why in refused:
        print(f"  {rid}: {why}")


if __name__ == "__main__":
    main()
