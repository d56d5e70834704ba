"""A pilot measurement as an observation on the layout model's efficiency factors. Computation only (NumPy).

A pilot (``--pilot count=512,tflops_per_gpu=420``, optionally with layout fields that differ from production's,
and ``sigma``, the measurement's log-scale error) is a measured throughput at a smaller scale on the same
stack. The layout prior (:class:`mcflops.layout.LayoutPrior`) draws the stack's efficiency parameters (GEMM
efficiency, exposed communication, stragglers) and the unstated settings once, on a fixed Latin hypercube, and
evaluates the step-time model at any layout and count on those same draws. So the pilot's predicted MFU and the
production's are two functions of one draw, and conditioning is importance weighting of the draws (Bayes' rule
on a sample of the prior; Smith & Gelfand 1992, "Bayesian statistics without tears"):

    w_i  proportional to  prod over pilots of  exp(-z^2 / 2),   z = (log m_obs - log m_pilot,i) / sigma

with m_obs = tflops_per_gpu / peak, the MFU the pilot measured, counted with the architecture's FLOPs (as
Megatron-LM and NeMo report TFLOP/s per GPU: attention included), and m_pilot,i the layout model's MFU at the
pilot's layout and count in the same units. The production MFU is the posterior predictive: the weighted
distribution of the same draws' MFU at the production layout and count, in the file's FLOPs units. Its
effective sample size (Kish: (sum w)^2 / sum w^2) says how much of the hypercube the pilot leaves.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from mcflops.errors import UsageError

SIGMA = 0.05  # default log-scale error of a pilot's measured throughput: run-to-run spread of a few percent
MIN_ESS = 200  # below this the posterior predictive's table rests on too few draws: refused
NUMBERS = ("count", "tflops_per_gpu", "sigma")
PILOT = ("pilots", "--pilot")  # how a pilot's mistake names it: ladder(pilots=), the command line's --pilot


def key_values(text: str, arg: str, flag: str | None = None) -> dict[str, Any]:
    """``tp=8,pp=8,recompute=selective,fsdp=true`` as a mapping: whole numbers as int, other numbers as float,
    true/false as bool, the rest as text (each field is checked where it is used). ``arg``, ``flag``: the
    argument (and its command-line flag) a mistake is named by."""
    from mcflops.numbers import parse_number

    out: dict[str, Any] = {}
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise UsageError(f"expected KEY=VALUE like tp=8, got '{part}'", arg=arg, flag=flag)
        x = parse_number(value)
        out[key] = (value.lower() == "true" if value.lower() in ("true", "false") else
                    int(x) if x is not None and math.isfinite(x) and x == int(x) else x if x is not None else value)
    return out


def parse_pilot(text: str) -> dict[str, Any]:
    """One ``--pilot`` option: count and tflops_per_gpu (required), sigma, and layout fields for the pilot's layout
    where it differs from production's (checked when the layout is applied)."""
    fields = key_values(text, *PILOT)
    for k in ("count", "tflops_per_gpu"):
        if k not in fields:
            raise UsageError(f"missing {k}= (e.g. count=512,tflops_per_gpu=420), got '{text}'", arg=PILOT[0],
                             flag=PILOT[1])
    for k in NUMBERS:
        if k in fields:
            x = fields[k]
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not x > 0 or not math.isfinite(x):
                raise UsageError(f"expected {k}= a number > 0, got {x!r}", arg=PILOT[0], flag=PILOT[1])
    if fields["count"] != int(fields["count"]):
        raise UsageError(f"expected count= a whole number, got {fields['count']!r}", arg=PILOT[0],
                         flag=PILOT[1])
    from mcflops.spec.layoutspec import KEYS

    unknown = [k for k in fields if k not in (*NUMBERS, *KEYS)]
    if unknown:
        raise UsageError(f"unknown field {unknown[0]}= (expected count, tflops_per_gpu, sigma and layout fields: "
                         f"{', '.join(KEYS)})", arg=PILOT[0], flag=PILOT[1])
    return {"count": int(fields.pop("count")), "tflops_per_gpu": float(fields.pop("tflops_per_gpu")),
            "sigma": float(fields.pop("sigma", SIGMA)), "layout": fields}


def condition(prior, pilots: Sequence[Mapping[str, Any]], count: int | None = None) -> dict[str, Any]:
    """The production MFU's posterior predictive given ``pilots`` (parsed by :func:`parse_pilot`) under the
    layout prior ``prior`` at ``count`` (default: the file's): its quantile table (a Dist), the weights' effective
    sample size, and each pilot's predicted MFU before and after (the check that the fit reproduces it)."""
    from mcflops.layout.prior import DRAWS
    from mcflops.priors.table import KNOT_PROBS, table_dist

    prod = np.asarray(prior.factor_draws(count)["mfu"], float)
    logw = np.zeros(prod.size)
    seen = []
    for p in pilots:
        try:
            at = prior.variant(**p["layout"]) if p["layout"] else prior
            why = at.runs_on(p["count"])
            if why is not None:
                raise ValueError(why)
        except (ValueError, TypeError) as e:
            raise UsageError(f"the pilot's layout on {p['count']:,} accelerators: {e}", arg=PILOT[0],
                             flag=PILOT[1]) from None
        pred = np.asarray(at.factor_draws(p["count"])["mfu"], float) / prior.counting  # the architecture's FLOPs
        obs = p["tflops_per_gpu"] * 1e12 / prior.peak
        if not 0 < obs <= 1:
            raise UsageError(f"tflops_per_gpu {p['tflops_per_gpu']:g} is {obs:.0%} of the accelerator's dense peak "
                             f"({prior.peak / 1e12:g} TFLOP/s); expected a measured throughput below it",
                             arg=PILOT[0], flag=PILOT[1])
        logw += -0.5 * ((math.log(obs) - np.log(pred)) / p["sigma"]) ** 2
        seen.append((p, obs, pred))
    w = np.exp(logw - logw.max())
    ess = float(w.sum() ** 2 / (w * w).sum())
    if ess < MIN_ESS:
        raise UsageError(f"the pilot leaves {ess:.0f} of the layout model's {DRAWS:,} draws (effective sample size): "
                         "the model cannot reach that throughput at that layout; check the pilot's layout and "
                         "tflops_per_gpu, or widen sigma", arg=PILOT[0], flag=PILOT[1])
    q = weighted_quantiles(prod, w, KNOT_PROBS)
    checks = [{"count": p["count"], "tflops_per_gpu": p["tflops_per_gpu"], "sigma": p["sigma"],
               "layout": dict(p["layout"]), "observed_mfu": obs,
               "predicted_prior": dict(zip(("p5", "p50", "p95"), np.quantile(pred, [0.05, 0.5, 0.95]).tolist())),
               "predicted_posterior": dict(zip(("p5", "p50", "p95"),
                                               weighted_quantiles(pred, w, [0.05, 0.5, 0.95]).tolist()))}
              for p, obs, pred in seen]
    words = "; ".join(f"{c['count']:,} accelerators at {c['tflops_per_gpu']:g} TFLOP/s per GPU (sigma {c['sigma']:g})"
                      + (f", layout {', '.join(f'{k} {v}' for k, v in c['layout'].items())}" if c["layout"] else "")
                      for c in checks)
    source = (f"the layout model's MFU at production conditioned on a pilot ({words}): posterior predictive, "
              f"effective sample size {ess:,.0f} of {DRAWS:,}")
    return {"dist": table_dist(KNOT_PROBS, q, source=source), "ess": ess, "draws": DRAWS, "pilots": checks,
            "source": source}


def weighted_quantiles(x: np.ndarray, w: np.ndarray, probs) -> np.ndarray:
    """Quantiles of the weighted sample (x, w): the weighted CDF at the midpoints of each draw's weight, linear
    between them (Hyndman & Fan 1996's type 5, with weights)."""
    o = np.argsort(x)
    xs, ws = x[o], w[o]
    c = (np.cumsum(ws) - 0.5 * ws) / ws.sum()
    return np.interp(np.asarray(probs, float), c, xs)
