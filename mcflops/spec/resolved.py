"""The spec back as plain data, every default filled in: the resolved prior file, and what its hash covers."""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.numbers import python_scalar


def resolved_dict(spec) -> dict[str, Any]:
    """The :class:`~mcflops.spec.Spec` with every default filled in, as plain data (also the resolved prior
    file). Its module sits below the Spec's (``Spec.digest`` hashes this), so it takes the spec untyped."""
    d: dict[str, Any] = {"name": spec.name, "description": spec.description, "seed": spec.seed,
                         "samples": spec.samples, "flops": spec.flops}
    h = spec.hardware
    d["hardware"] = {k: v for k, v in (("accelerator", h.accelerator), ("precision", h.precision),
                                       ("count", h.count)) if v is not None}
    if spec.architecture is not None:
        d["architecture"] = {k: v for k, v in spec.architecture.__dict__.items() if v is not None}
    d["priors"] = {n: dist.to_dict() for n, dist in spec.priors.items()}
    if spec.observe:
        obs = {}
        for n, o in spec.observe.items():
            if o.noise == "between":
                obs[n] = {"between": [o.low, o.high]}
            elif o.noise == "lognormal":
                obs[n] = {"value": o.value, "sigma": o.scale}
            else:
                obs[n] = {"value": o.value, "noise": "normal", "sd": o.scale}
            if o.source:
                obs[n]["source"] = o.source
        d["observe"] = obs
    if spec.reported:
        d["reported"] = {n: r.to_dict() for n, r in spec.reported.items()}
    # the analysis blocks as the file wrote them (their typed values are what the file's words mean)
    if spec.sensitivity.written is not None:
        d["sensitivity"] = spec.sensitivity.written
    if spec.correlations:
        d["correlations"] = [c.written for c in spec.correlations]
    if spec.plan.written is not None:
        d["plan"] = spec.plan.written
    if spec.compare.written is not None:
        d["compare"] = spec.compare.written
    return plain(d)


def plain(x: Any) -> Any:
    """YAML's values as plain Python data: mappings to dicts with text keys, lists, numbers, text (a
    notebook's NumPy scalars as the numbers they hold)."""
    x = python_scalar(x)
    if isinstance(x, Mapping):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain(v) for v in x]
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, int):
        return int(x)
    if isinstance(x, float):
        return float(x)
    return str(x)
