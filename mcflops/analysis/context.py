"""A run's MFU in context: ``mcflops run``'s own rungs of the ladder (analysis.ladder), for its report.

The ladder of the run's prior file, computed by :func:`mcflops.analysis.ladder.ladder` itself (no second
ladder): the file's MFU prior as written (the run's own Spec, its first rung), the calibrated prior from
published runs on its accelerator generation at its size unless that is the file's prior already, and the
layout model's without its pilot when the file's prior is a pilot-conditioned layout prior. No layout is
given to a run, so a hand-set file gets no layout rung (``mcflops ladder FILE --layout ...`` adds one).

A file that observes a published figure (``observe:``) is a question about a run that happened. Its rungs
are still priors (the ladder leaves ``observe:`` out of every rung): what a planner would have forecast for
the same run before the figure, which is what a reviewer checks the prior against. The record says so
(``distribution: prior``, ``observed``), and a note sets the run's posterior MFU x goodput beside the
published runs' band; where the figure the file observes is itself one of the published runs the calibrated
prior was fit to, the note says that this rung is not independent of it.
Computation only: api.run puts the result in the run record, output writes it, report renders it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

REL = 0.01  # an observed GPU-hours figure within 1% of a published run's hours is that run's figure
# the context's draws, at most (the file's samples when fewer): its GPU-hours medians' MCSE is then at most
# 0.1% of the median for a rung whose log GPU-hours has sd 0.4 (1.2533 x 0.4 / 512), under the report's
# three digits, and a warm flagship run pays for a quarter of its 1e6 draws (benchmarks/RESULTS.md)
DRAWS = 1 << 18


def context(spec, source: str | Path | Mapping, *, key, samples: int | None = None) -> dict[str, Any]:
    """The ladder of ``source`` (the run's prior file, or the notebook's mapping) with ``spec`` (the run's
    Spec) as its first rung, drawn with ``key`` (the run's), ``samples`` draws (default: the file's; at most
    DRAWS) and the run's seed. It needs nothing the run computes, so a run may compute it beside its own pass;
    :func:`observed` adds what the run's posterior says."""
    from mcflops.analysis.ladder import ladder

    n = min(spec.samples if samples is None else int(samples), DRAWS)
    out = ladder(source, None, samples=n, seed=spec.seed, key=key, base=spec)
    out["distribution"] = "prior"
    return out


def observed(out: Mapping[str, Any], spec, posterior: Mapping[str, Any] | None) -> dict[str, Any]:
    """``out`` (:func:`context`'s) with, for a file with ``observe:``, what it observes and the notes on the
    run's ``posterior`` (summary.json's) against the rungs; as it is otherwise."""
    if not spec.observe:
        return dict(out)
    return {**out, "observed": sorted(spec.observe),
            "notes": [*out["notes"], *_observed_notes(spec, out["rungs"], posterior)]}


def _observed_notes(spec, rows, posterior: Mapping[str, Any] | None) -> list[str]:
    names = ", ".join(sorted(spec.observe))
    notes = [f"every rung is a prior: the file's observe: block ({names}) is left out of each, so the rungs are "
             "what a planner could have forecast for this run before its published figure; the posterior is in "
             "the sections that read that figure"]
    cal = next((r for r in rows if r["kind"] == "calibrated"), None)
    u = ((posterior or {}).get("mfu_x_goodput") or {}).get("p50")
    if cal is not None and isinstance(u, (int, float)):
        lo, hi = cal["effective"]["p5"], cal["effective"]["p95"]
        side = "above" if u > hi else "below" if u < lo else "inside"
        notes.append(f"the posterior's MFU x goodput median {u:.3f} (given {names}) is {side} the published runs' "
                     f"90% band [{lo:.3f}, {hi:.3f}] ({cal['tag']})")
    same = _observed_run(spec) if cal is not None else None
    if same is not None:
        notes.append(f"the published runs' rung ({cal['tag']}) is fit to {same} among others, the run whose "
                     f"figure this file observes: it is context for the prior, not evidence independent of "
                     "that figure")
    return notes


def _observed_run(spec) -> str | None:
    """The published run (mcflops/data/published_runs.yaml) whose GPU-hours the file observes: same accelerator,
    hours within REL; None when the file observes no GPU-hours or no such run ships."""
    from mcflops.spec.evidence import published_hours

    o = spec.observe.get("gpu_hours")
    v = getattr(o, "value", None)
    if not isinstance(v, (int, float)) or v <= 0:
        return None
    hits = [i for i, acc, hours in published_hours()
            if acc == spec.hardware.accelerator and abs(hours / v - 1) <= REL]
    return hits[0] if len(hits) == 1 else None
