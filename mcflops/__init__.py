"""mcflops: how much compute a training run takes, and how sure we are.

Public API (a notebook uses it the way the CLI does)::

    import mcflops
    spec = mcflops.load_spec("priors/llama405b.yaml")   # or a dict
    res = mcflops.run(spec, samples=1_000_000)
    res.prior["gpu_hours"]["p50"], res.posterior["mfu"]
"""

from mcflops.api import Result as Result, device_name as device_name, run as run
from mcflops._version import version as version
from mcflops.errors import SpecError as SpecError
from mcflops.spec import Spec as Spec, load_spec as load_spec, resolved_dict as resolved_dict

__version__ = version()
