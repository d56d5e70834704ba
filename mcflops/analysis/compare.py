"""``compare``: two prior files on common random numbers. Computation only.

Each input draws from ``fold_in(key, crc32(name))``, so inputs with the same name get the same z in
both files, and one jitted pass evaluates both models on them and reduces the histograms of both
outputs and of the ratio B / A (``analysis.histpass``).
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from mcflops import engine
from mcflops.analysis.histpass import NBINS, quantiles, reduce
from mcflops.errors import SpecError
from mcflops.model.compute import build_model, evaluate


def _compare_rows(key, models, lik, block, size, output: str):
    """Both models' centred log output on the same z, and their difference (log B/A minus a constant)."""
    a, b = models
    da = jnp.broadcast_to(evaluate(a, engine.draw_z(key, a, block, size))[output], (size,))
    db = jnp.broadcast_to(evaluate(b, engine.draw_z(key, b, block, size))[output], (size,))
    return jnp.stack([da, db, db - da]), None


def compare(spec_a, spec_b, *, output: str = "gpu_hours", samples: int | None = None, seed: int | None = None,
            progress: Callable[[int, int], None] | None = None, key: jax.Array | None = None) -> dict[str, Any]:
    """B against A on common random numbers: both outputs' quantiles and the distribution of B / A
    (``key``: in place of ``jax.random.key(seed)``)."""
    for s in (spec_a, spec_b):
        if output not in s.outputs:
            raise SpecError(f"'{output}' is not an output of this file (outputs: {', '.join(s.outputs)})",
                            path=s.path, field="--output")
    n = spec_a.samples if samples is None else int(samples)
    seed = spec_a.seed if seed is None else int(seed)
    ma, mb = build_model(spec_a), build_model(spec_b)
    shift = mb.centers[output] - ma.centers[output]  # log(B/A) = shift + (dB - dA)
    h = reduce(engine.seed_key(seed) if key is None else key, _compare_rows, (ma, mb), None, n, static=(output,),
               thresholds=[0.0, 0.0, -shift], progress=progress)
    probs = [0.05, 0.25, 0.5, 0.75, 0.95]
    names = ("p5", "p25", "p50", "p75", "p95")

    def side(spec, m, row):
        return {"name": spec.name, "path": spec.path,
                **dict(zip(names, np.exp(m.centers[output] + quantiles(h, row, probs)).tolist()))}

    ratio = dict(zip(names, np.exp(shift + quantiles(h, 2, probs)).tolist()))
    total = float(h["s0"])
    ratio.update(min=float(np.exp(shift + h["min"][2])), max=float(np.exp(shift + h["max"][2])),
                 prob_b_greater=float(h["above"][2] / total), prob_b_less=float(h["below"][2] / total))
    hist = h["hist"][2][1:-1].reshape(-1, NBINS // 64).sum(axis=1)  # 64 coarse bins for the plot
    edges = h["lo"][2] + h["width"][2] * (NBINS // 64) * np.arange(65)
    shared = [k for k in ma.inputs if k in mb.inputs and ma.sampler(k).kind != "const"
              and mb.sampler(k).kind != "const"]
    notes = []
    if (ma.copula is None) != (mb.copula is None) or (ma.copula is not None and ma.copula.names != mb.copula.names):
        notes.append("the two files correlate different inputs, so the shared inputs' draws differ where the "
                     "correlations do")
    return {"output": output, "seed": seed, "samples": n, "a": side(spec_a, ma, 0), "b": side(spec_b, mb, 1),
            "ratio": ratio, "shared_inputs": shared, "common_random_numbers": True,
            "ratio_hist": {"log_edges": (shift + edges).tolist(), "weights": (hist / total).tolist()},
            "notes": notes}
