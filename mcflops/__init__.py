"""mcflops: how much compute a training run takes, and how sure we are.

Public API (a notebook uses it the way the CLI does)::

    import mcflops
    spec = mcflops.load_spec("priors/llama405b.yaml")   # or a dict
    res = mcflops.run(spec, samples=1_000_000)          # the displayed result: a few lines, or HTML
    res.quantile("gpu_hours", 0.9), res.table(), res.to_arviz()
    res.write("reports/mine")                           # the folder `mcflops run` writes, report included
    p = mcflops.plan(spec, deadline_days=90)            # also: sample, compare, sensitivity, calibrate
    mcflops.write("plan", p, "out/")                    # plan.json and plan.png, as `mcflops plan --out`
"""

from mcflops.api import (Result as Result, calibrate as calibrate, compare as compare, device_name as device_name,
                         plan as plan, run as run, sample as sample, sensitivity as sensitivity, write as write)
from mcflops._version import version as version
from mcflops.errors import SpecError as SpecError
from mcflops.spec import Spec as Spec, load_spec as load_spec, resolved_dict as resolved_dict

__version__ = version()
