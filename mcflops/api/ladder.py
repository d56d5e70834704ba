"""``mcflops.api.ladder``: the ladder of information for one prior file (mcflops.analysis.ladder) as the plain
data `mcflops ladder --json` prints and ladder.json holds, its arguments checked as the API's are."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from mcflops.api.args import Call, speaking
from mcflops.api.result import jsonable
from mcflops.errors import kind


@speaking
def ladder(spec: str | Path | Mapping, *, layout: Sequence[str] | Mapping[str, Any] | None = None,
           pilots: Sequence[str | Mapping[str, Any]] = (), samples: int | None = None, seed: int | None = None,
           key=None, progress=None) -> dict[str, Any]:
    """The same run under each MFU prior a planner can reach, side by side (``mcflops ladder``): the file's own,
    the calibrated prior from published runs, the layout model's with ``layout`` (``{"tp": 8, "pp": 8,
    "global_batch": 2048}`` or the CLI's ``["tp=8,pp=8,global_batch=2048"]``), and with ``pilots`` (each
    ``"count=512,tflops_per_gpu=420"`` or ``{"count": 512, "tflops_per_gpu": 420, "layout": {...}}``) the layout
    rung conditioned on them; a file's own ``pilot:`` block is its rung. ``spec``: a prior file's path or a
    mapping (each rung is the file with its ``mfu`` replaced, so a loaded Spec will not do). ``rungs``, ``deadline``
    and ``notes``, JSON types: what the CLI prints with ``--json``."""
    from mcflops import engine
    from mcflops.analysis import ladder as ladder_mod
    from mcflops.analysis.pilot import parse_pilot

    call = Call("ladder")
    if not isinstance(spec, (str, Path, Mapping)) or (isinstance(spec, str) and not spec.strip()):
        raise call.error("spec", "expected a prior file's path or a mapping (each rung replaces the file's mfu "
                                 f"prior), got {kind(spec)}")
    samples = None if samples is None else call.samples(samples)
    seed = None if seed is None else call.seed(seed)
    if layout is not None and not isinstance(layout, Mapping):
        if isinstance(layout, str) or not all(isinstance(x, str) for x in layout):
            raise call.error("layout", f"expected a mapping like {{'tp': 8, 'pp': 8, 'global_batch': 2048}} or a list "
                                       f"like ['tp=8,pp=8,global_batch=2048'], got {kind(layout)}")
        layout = ladder_mod.layout_options(list(layout))
    if isinstance(pilots, (str, Mapping)) or not all(isinstance(p, (str, Mapping)) for p in pilots):
        raise call.error("pilots", f"expected a list of pilots like ['count=512,tflops_per_gpu=420'], got {kind(pilots)}")
    parsed = [parse_pilot(p if isinstance(p, str) else _text(p)) for p in pilots]
    progress = call.callback(progress, "progress")
    engine.setup()
    key = call.key(key)
    return jsonable(ladder_mod.ladder(spec, layout, pilots=parsed, samples=samples, seed=seed, key=key,
                                      progress=progress))


def _text(p: Mapping[str, Any]) -> str:
    """A pilot mapping as the CLI's text (its layout's fields beside the others), for the one parser."""
    fields = {k: v for k, v in p.items() if k != "layout"} | dict(p.get("layout") or {})
    return ",".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in fields.items())

