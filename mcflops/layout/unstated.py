"""The layout fields a prior file may leave unstated, and the settings each could have taken. NumPy-free.

A file that does not say how its stack recomputes, how many virtual stages it interleaves or how large its
micro-batches are has not said that it uses none, two or one: it has not chosen yet. Such a field is *mixed*:
the candidates are the joint settings of the mixed fields that can run the model (:func:`mcflops.layout.problem`)
and fit the accelerator's memory (:func:`mcflops.layout.memory`), and each draw of the efficiencies takes the one
that runs fastest with them (:class:`mcflops.layout.LayoutPrior`). That is what operators do: the micro-batch
size, the virtual stages and the recompute policy are swept on the real stack before a long run (Narayanan et
al. 2021, Sec. 3.3-3.5, choose each by measured throughput; Korthikanti et al. 2022, Sec. 5, recompute only
what does not fit). An equal-weight mixture, which this replaced, put a sixth of a 70B's draws on one
micro-batch per pipeline (TP 8, PP 8, 32 sequences a replica: a bubble 7x the compute) and read the layout at
20% MFU with a 4% lower tail, below every published run of the size. The choice is a model of a tuned run; a
file that knows its settings states them. A setting that cannot fit is never taken, and only a layout no setting
fits is refused. The candidates:

- ``recompute``: none, selective and full (Korthikanti et al. 2022, Sec. 5). Selective keeps the same activations
  as none here (FlashAttention stores no attention scores: mcflops.layout.memory), so a layout whose activations
  do not fit without recomputation takes full alone: a 70B with CP 2 and FSDP on 64 GPUs, which ran with
  activation checkpointing, is read so, where an unstated recompute used to be taken as none and refused.
- ``vpp`` under ``schedule: interleaved``: each count of virtual stages per pipeline rank from 2 up. When the
  layers split evenly over the stages, v must split a stage's layers evenly too (Megatron-LM's
  ``--num-layers-per-virtual-pipeline-stage`` makes equal chunks: Narayanan et al. 2021, Sec. 2.2.2); when they
  do not (Llama 3 405B: 126 layers on 16 stages, Sec. 3.3.2 "we remove one Transformer layer each from the first
  and the last stages"), every v up to the layers per stage.
- ``micro_batch``: each divisor b of the sequences per data-parallel replica per step, global_batch / dp
  (Megatron-LM asserts the global batch divisible by micro-batch x dp); each power of two up to it when that
  is not whole (dp following a count that does not divide the batch).

Memory is the central estimate's (headroom >= 0), the rule the layout fit applies to a benchmark row whose
recompute is unstated (mcflops.layoutfit.fit); where no setting fits at the central estimate, those that
fit within the activation estimate's error take the weight (and the report notes it).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Callable, Sequence

from mcflops.layout.model import RECOMPUTE, Layout, problem

MIXABLE = ("recompute", "vpp", "micro_batch")  # the order of a combination's values


def candidates(field: str, lo: Layout, shape, count: int) -> tuple[Any, ...]:
    """The settings ``field`` could take for ``lo`` on ``count`` accelerators (the module docstring)."""
    if field == "recompute":
        return RECOMPUTE
    if field == "vpp":
        per_stage = shape.layers / lo.pp
        top = int(per_stage)
        if per_stage == top:
            return tuple(v for v in range(2, top + 1) if top % v == 0)
        return tuple(range(2, top + 1))
    if field == "micro_batch":
        per_replica = lo.global_batch / lo.data_parallel(count)
        if per_replica == int(per_replica) and per_replica >= 1:
            whole = int(per_replica)
            return tuple(b for b in range(1, whole + 1) if whole % b == 0)
        return tuple(1 << k for k in range(max(int(per_replica), 1).bit_length()))
    raise ValueError(f"layout.{field} cannot be mixed")


def _runnable(lo: Layout, shape, count: int, mixed: Sequence[str]):
    """Each joint setting of the ``mixed`` fields (values in ``mixed``'s order) that runs, with its layout."""
    for values in itertools.product(*(candidates(k, lo, shape, count) for k in mixed)):
        lay = dataclasses.replace(lo, **dict(zip(mixed, values)))
        if problem(lay, shape, count) is None:
            yield values, lay


def combinations(lo: Layout, shape, count: int, mixed: Sequence[str],
                 memory_of: Callable[[Layout], Any] | None) -> tuple[tuple[tuple, ...], bool]:
    """The joint settings of the ``mixed`` fields (values in ``mixed``'s order) that run and fit, and whether
    they fit only within the activation estimate's error. ``memory_of``: a layout's
    :class:`mcflops.layout.Memory` (None: no memory check). Empty when no setting runs or fits."""
    if memory_of is None:
        return tuple(v for v, _ in _runnable(lo, shape, count, mixed)), False
    mems = {v: memory_of(lay) for v, lay in _runnable(lo, shape, count, mixed)}
    fit = tuple(v for v, m in mems.items() if m.headroom >= 0)
    if fit:
        return fit, False
    return tuple(v for v, m in mems.items() if not m.cannot_fit), True


def leanest(lo: Layout, shape, count: int, mixed: Sequence[str], memory_of: Callable[[Layout], Any]) -> Layout:
    """``lo`` at the setting of the ``mixed`` fields that runs with the least memory: the one a refusal's message
    quotes when none fits (``lo`` itself when none runs)."""
    return min((lay for _, lay in _runnable(lo, shape, count, mixed)), key=lambda lay: memory_of(lay).total,
               default=lo)
