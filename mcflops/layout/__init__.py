"""MFU from the parallel layout: a step-time model (model.py), memory per accelerator (memory.py) and the
prior they make over the efficiency parameters (prior.py). NumPy only: no JAX here."""

from mcflops.layout.explain import explain
from mcflops.layout.fit import load_fit
from mcflops.layout.memory import ACTIVATION_ERROR, Memory, memory
from mcflops.layout.model import ATTENTION, CLASS_PARAM, ELEMENTWISE, FACTORS, FRACTIONS, GEMM_REF, OPTIONAL, OVERLAP_FLAGS, PARAMS, RECOMPUTE, SCHEDULES, SOFT, SWEEPABLE, \
    Layout, Terms, bubble_ratio, communication_time, exposed, factors, gemm_efficiency, mfu, overlap_defaults, problem, recompute_ratio, terms
from mcflops.layout.prior import DRAWS, LayoutPrior
from mcflops.layout.waterfall import Waterfall, posterior_weights, waterfall

__all__ = ["ACTIVATION_ERROR", "ATTENTION", "CLASS_PARAM", "DRAWS", "ELEMENTWISE", "FACTORS", "FRACTIONS", "GEMM_REF", "OPTIONAL", "OVERLAP_FLAGS", "PARAMS", "SOFT", "RECOMPUTE", "SCHEDULES", "SWEEPABLE", "Layout", "LayoutPrior", "Memory", "Terms", "Waterfall",
           "bubble_ratio", "communication_time", "explain", "exposed", "factors", "gemm_efficiency", "load_fit", "memory", "mfu", "overlap_defaults", "posterior_weights", "problem", "recompute_ratio", "terms",
           "waterfall"]
