"""The spec back as plain data, every default filled in: the resolved prior file, and what its hash covers.

A prior that depends on the accelerator count (``goodput: {failures: ...}``) is written as its recipe, every
default filled in (its count included), not as its table at the file's count: a rerun from the resolved file
re-solves it at every count ``plan`` asks about, as the original does. The table the run drew from is written
beside it as a comment (:func:`resolved_document`), for the reader; the loader recomputes it. A ratio prior
(``{relative_to: FILE, ratio: ...}``) is written as its table, with a comment: its path is relative to the
original file, which a run folder is not beside.
"""

from __future__ import annotations

import textwrap
from typing import Any, Mapping

from mcflops.numbers import python_scalar
from mcflops.priors.goodput import FAILURE_KEYS, Failures


def resolved_dict(spec) -> dict[str, Any]:
    """The :class:`~mcflops.spec.Spec` with every default filled in, as plain data (also the resolved prior
    file). Its module sits below the Spec's (``Spec.digest`` hashes this), so it takes the spec untyped."""
    d: dict[str, Any] = {"name": spec.name, "description": spec.description, "seed": spec.seed,
                         "samples": spec.samples, "flops": spec.flops}
    h = spec.hardware
    d["hardware"] = {k: v for k, v in (("accelerator", h.accelerator), ("precision", h.precision),
                                       ("count", h.count)) if v is not None}
    if spec.architecture is not None:
        a = {k: v for k, v in spec.architecture.__dict__.items() if v is not None}
        if "hf_config" in a:  # every value read from it is written out: the resolved file stands alone (a run
            # folder cannot find a config.json named relative to the original prior file)
            read = f"read from the Hugging Face config {a.pop('hf_config')} beside the original prior file"
            a["source"] = f"{a['source']}; {read}" if a.get("source") else read
        d["architecture"] = a
    d["priors"] = {n: _prior(spec, n, dist) for n, dist in spec.priors.items()}
    if getattr(spec, "pilots", ()):  # the mfu above is the layout recipe; the loader conditions it on these again
        d["pilot"] = [p.to_dict() for p in spec.pilots]
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


def _prior(spec, name: str, dist) -> dict[str, Any]:
    """A prior's resolved form: its recipe when it depends on the count (an object with ``to_dict()``, or a
    :class:`~mcflops.priors.goodput.Failures`), else the distribution it resolved to."""
    recipe = spec.count_dependent.get(name)
    if isinstance(recipe, Failures):
        return failures_dict(recipe)
    form = getattr(recipe, "to_dict", None)
    return form() if callable(form) else dist.to_dict()


def failures_dict(f: Failures) -> dict[str, Any]:
    """``{failures: {...}, source: ...}`` with every default filled in (count, checkpoint_write_h 0): what
    :func:`mcflops.spec.recipes.parse_failures` reads back into the same :class:`Failures`."""
    parts: dict[str, Any] = {}
    for k in FAILURE_KEYS:
        if f.uncertain is not None and f.uncertain[0] == k:
            parts[k] = f.uncertain[1].to_dict()
        elif k in f.values:
            parts[k] = int(f.values[k]) if k == "count" else f.values[k]
    out: dict[str, Any] = {"failures": parts}
    if f.source:
        out["source"] = f.source
    return out


def resolved_document(spec):
    """:func:`resolved_dict` as a ruamel.yaml document (what spec.resolved.yaml holds): a count-dependent
    prior's recipe carries, as a comment above it, the quantiles the run drew from at the file's count."""
    from ruamel.yaml.comments import CommentedMap

    def commented(x):
        if isinstance(x, dict):
            return CommentedMap((k, commented(v)) for k, v in x.items())
        return [commented(v) for v in x] if isinstance(x, list) else x

    doc = commented(resolved_dict(spec))
    priors = doc["priors"]
    for name in spec.count_dependent:
        if name in priors:
            priors.yaml_set_comment_before_after_key(name, before=_table_comment(spec, name), indent=2)
    for r in spec.compare.ratios:  # written as the product's table: the file stands alone
        if r.name in priors:
            priors.yaml_set_comment_before_after_key(r.name, indent=2, before="\n".join(textwrap.wrap(
                f"{r.name} below is the file's {r.name}: {{relative_to: {r.relative_to}, ratio: {r.ratio.describe()}}} "
                f"resolved to a table (that file's prior times the ratio). `mcflops compare {r.relative_to} FILE` "
                "draws it as A's draw times the ratio's from the original file, not from this one.", 100)))
    return doc


def _table_comment(spec, name: str) -> str:
    """Where a count-dependent prior's draws came from: its quantiles at the file's count."""
    from mcflops.priors.quantiles import ppf

    probs = (0.0001, 0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 0.9999)
    q = ppf(spec.priors[name], probs)
    count = getattr(spec.count_dependent[name], "count", spec.hardware.count)
    cells = ", ".join(f"p{100 * p:g} {v:.6g}" for p, v in zip(probs, q))
    piloted = ", conditioned on the pilot: block below," if name == "mfu" and getattr(spec, "pilots", ()) else ""
    return "\n".join(textwrap.wrap(
        f"{name} below is a recipe: the loader re-solves it at the file's count, and `plan` at every count it asks "
        f"about. At {count} accelerators it gives{piloted} the quantile table this run drew from: {cells}", 100))


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
