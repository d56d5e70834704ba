"""The public API a notebook uses, and the CLI wraps: load a spec, run it, get a result.

Every function takes a prior file's path, a mapping (a notebook's dict) or a :class:`Spec`, and the
keyword overrides ``samples=``, ``seed=`` and ``key=`` (a JAX key in place of ``jax.random.key(seed)``).
:func:`run` and :func:`sample` give a :class:`Result`; :func:`plan`, :func:`compare`, :func:`sensitivity`,
:func:`ladder` and :func:`calibrate` give the plain dicts the CLI writes as plan.json, compare.json,
sensitivity.json, ladder.json and calibration.json (JSON types: one vocabulary for the files, the CLI's ``--json`` and the notebook).
"""

from mcflops.api.calls import (Phase, Progress, SpecLike, calibrate, compare, plan, run, sample, sensitivity,
                               write)
from mcflops.api.ladder import ladder
from mcflops.api.result import HEADLINE, Result, device_name, jsonable
from mcflops.spec import load_spec, resolved_dict
from mcflops._version import version

__all__ = ["HEADLINE", "Phase", "Progress", "Result", "SpecLike", "calibrate", "compare", "device_name", "jsonable",
           "ladder", "load_spec", "plan", "resolved_dict", "run", "sample", "sensitivity", "version", "write"]
