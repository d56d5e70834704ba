"""Prior file -> one frozen, validated :class:`Spec` (plain Python, no JAX); its JSON Schema."""

from mcflops.spec.load import (CONVENTIONS, INPUTS, MAX_SAMPLES, OUTPUTS, Architecture, Hardware, Observation, Spec,
                               check_samples, load_spec, resolved_dict)

__all__ = ["CONVENTIONS", "INPUTS", "MAX_SAMPLES", "OUTPUTS", "Architecture", "Hardware", "Observation", "Spec",
           "check_samples", "load_spec", "resolved_dict"]
