"""Prior file -> one frozen, validated :class:`Spec` (plain Python, no JAX); its JSON Schema.

Every block is checked at load (priors, observe, correlations, sensitivity, plan), with one vocabulary
for "this field, this line, what was expected" (:class:`Fields`). The command line's overrides of the
``sensitivity:`` and ``plan:`` blocks go through the same checks: :func:`sensitivity_options`,
:func:`plan_options`.
"""

from mcflops.spec.correlations import correlation_matrix
from mcflops.spec.fields import Fields
from mcflops.spec.load import check_samples, load_spec
from mcflops.spec.options import plan_options, sensitivity_options
from mcflops.spec.reported import Reported
from mcflops.spec.resolved import resolved_dict, resolved_document
from mcflops.spec.types import (CONVENTIONS, INPUTS, MAX_SAMPLES, OUTPUTS, SOBOL_BASE, SWEEP_POINTS, Architecture,
                                Correlation, Hardware, Observation, PlanOptions, SensitivityOptions, Spec)

__all__ = ["CONVENTIONS", "INPUTS", "MAX_SAMPLES", "OUTPUTS", "SOBOL_BASE", "SWEEP_POINTS", "Architecture",
           "Correlation", "Fields", "Hardware", "Observation", "PlanOptions", "Reported", "SensitivityOptions", "Spec",
           "check_samples", "correlation_matrix", "load_spec", "plan_options", "resolved_dict",
           "resolved_document", "sensitivity_options"]
