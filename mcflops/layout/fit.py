"""The shipped efficiency priors (``mcflops/data/layout_fit.json``): the calibration's output, read once."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

FIT = Path(__file__).resolve().parents[1] / "data" / "layout_fit.json"


@lru_cache(maxsize=1)
def load_fit() -> Mapping[str, Any]:
    """{"default": {param: prior in the file grammar}, "accelerator": {id: {param: prior}}, ...}."""
    with open(FIT, encoding="utf-8") as f:
        return json.load(f)


def stack_names(fit: Mapping[str, Any]) -> tuple[str, ...]:
    """The software stacks the fit exports priors for (a file's ``stack:``)."""
    return tuple(sorted(fit.get("stack", {})))


def stack_entry(fit: Mapping[str, Any], stack: str | None) -> Mapping[str, Any]:
    """The part of the fit a file on ``stack`` reads (``default``, ``accelerator``, its ``residual``): the fitted
    stack's own, or the new-stack priors (``stack`` None)."""
    if stack is None:
        return {"default": fit["default"], "accelerator": fit.get("accelerator", {}),
                "residual": fit.get("row_residual", {}).get("sigma", 0.0)}
    return fit["stack"][stack]


def accelerator_priors(fit: Mapping[str, Any], accelerator: str, precision: str | None = None) -> Mapping[str, Any]:
    """The fit's entries for ``accelerator`` at ``precision``: ``"<id>/<precision>"`` where the fit exports one
    (its FP8 family: GEMM efficiency against the FP8 peak is not the BF16 one), else ``"<id>"``, else none."""
    acc = fit.get("accelerator", {})
    if precision and f"{accelerator}/{precision}" in acc:
        return acc[f"{accelerator}/{precision}"]
    return acc.get(accelerator, {})
