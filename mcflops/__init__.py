"""mcflops: how much compute a training run takes, and how sure we are.

Public API (a notebook uses it the way the CLI does)::

    import mcflops
    spec = mcflops.load_spec("priors/llama405b.yaml")   # or a dict
    res = mcflops.run(spec, samples=1_000_000)          # the displayed result: a few lines, or HTML
    res.quantile("gpu_hours", 0.9), res.table(), res.to_arviz()
    res.write("reports/mine")                           # the folder `mcflops run` writes, report included
    p = mcflops.plan(spec, deadline_days=90)            # also: sample, compare, sensitivity, calibrate
    mcflops.write("plan", p, "out/")                    # plan.json and plan.png, as `mcflops plan --out`

The names are loaded on first use (PEP 562): ``import mcflops.cli`` for ``mcflops validate`` then
imports neither the API layer nor NumPy's heavier users before they are needed.
"""

from __future__ import annotations

import importlib
import warnings

# typing.TYPE_CHECKING's value without importing typing (5 ms of the program's start, before its Ctrl-C is handled)
TYPE_CHECKING = False

from mcflops._version import version as version
from mcflops.errors import ReadError as ReadError, SpecError as SpecError, UsageError as UsageError

if TYPE_CHECKING:
    from mcflops.api import (Result as Result, calibrate as calibrate, compare as compare, device_name as device_name,
                             ladder as ladder, plan as plan, run as run, sample as sample, sensitivity as sensitivity, write as write)
    from mcflops.spec import Spec as Spec, load_spec as load_spec, resolved_dict as resolved_dict

# public name -> the module that defines it
_HOME = {**dict.fromkeys(("Result", "calibrate", "compare", "device_name", "ladder", "plan", "run", "sample",
                          "sensitivity", "write"),
                         "mcflops.api"),
         **dict.fromkeys(("Spec", "load_spec", "resolved_dict"), "mcflops.spec")}

__all__ = ["ReadError", "Result", "Spec", "SpecError", "UsageError", "calibrate", "compare", "device_name",
           "ladder", "load_spec", "plan", "resolved_dict", "run", "sample", "sensitivity", "version", "write", "__version__"]

# NumPyro imports tqdm.auto, which warns in a Jupyter kernel without ipywidgets; mcflops shows no tqdm bar
# (its progress is its own), so the warning only puts a red box under a notebook's first posterior
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm")


def __getattr__(name: str):
    if name == "__version__":  # read on first use: the metadata scan is most of this package's import time
        globals()[name] = version()
        return globals()[name]
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'mcflops' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME) | {"__version__"})
