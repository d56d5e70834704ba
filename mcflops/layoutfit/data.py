"""Measured, layout-resolved training runs (mcflops/data/layout_runs.yaml): loaded and validated.

Rows are ``benchmark`` (published benchmark tables: the fitting set) or ``production`` (real runs, held out
of every fit). The file's header comment is the schema; every row is checked against it, and a bad one raises
``LayoutDataError`` (a ValueError) naming the file, the row id and the field. The recompute modes, schedules and
overlap flags a row may name are the layout model's (:mod:`mcflops.layout.model`), its FLOP conventions the
chain's (:data:`mcflops.chain.PUBLISHED`). Plain Python, no JAX.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from mcflops import hardware
from mcflops.chain import PUBLISHED
from mcflops.layout import OVERLAP_FLAGS, RECOMPUTE, SCHEDULES

__all__ = ["KINDS", "LAYOUT_KEYS", "STATUSES", "LayoutDataError", "LayoutRun", "benchmark_rows", "load_layout_runs",
           "production_rows", "unfitted_rows"]

SCHEMA = "layout_runs_v1"
KINDS = ("benchmark", "production")
STATUSES = ("V", "Vq", "S", "D")
PRECISIONS = ("bf16", "fp16", "fp8")
DEGREES = ("tp", "pp", "dp", "cp", "ep", "etp", "edp", "vpp", "micro_batch", "global_batch")
LAYOUT_KEYS = (*DEGREES, "recompute", "schedule", "zero", "fsdp", "sequence_parallel", *OVERLAP_FLAGS)
ARCH_INTS = ("layers", "d_model", "heads", "kv_heads", "ffn", "vocab", "seq_len")
# mixture-of-experts and attention widths, named as mcflops.arch.Shape names them (absent: a dense row / the usual)
ARCH_OPTIONAL = ("experts", "experts_active", "moe_ffn", "head_dim", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim",
                 "qk_nope_head_dim", "v_head_dim")
ARCH_COUNTS = ("shared_experts", "dense_layers")  # may be 0
REQUIRED = ("id", "kind", "series", "model", "architecture", "params", "accelerator", "precision", "count",
            "layout", "measured", "source", "status", "licence", "obtained")
OPTIONAL = ("notes", "memory_gb", "fit", "fit_reason")
MEASURED_FRACTIONS = ("mfu", "hfu")
MEASURED_POSITIVE = ("tflops_per_gpu", "tokens_per_s_per_gpu", "iteration_time_s")
_DATA = "layout_runs.yaml"


class LayoutDataError(ValueError):
    """A malformed layout-runs file or row (the message names the file, row id and field)."""


@dataclass(frozen=True)
class LayoutRun:
    """One measured configuration; ``layout``, ``architecture``, ``params`` and ``measured`` are read-only maps."""

    id: str
    kind: str
    series: str
    model: str
    architecture: Mapping[str, Any] = field(hash=False)
    params: Mapping[str, float] = field(hash=False)
    accelerator: str
    precision: str | None
    count: int
    layout: Mapping[str, Any] = field(hash=False)
    measured: Mapping[str, Any] = field(hash=False)
    source: str
    status: str
    licence: str
    obtained: str
    notes: str = ""
    memory_gb: float | None = None
    fit: bool = True  # False: kept, but out of the fit and its validation (``fit_reason`` says why)
    fit_reason: str = ""

    @property
    def moe(self) -> bool:
        return bool(self.architecture["experts"])

    @property
    def mfu(self) -> float | None:
        """The utilisation as the source counts it (``measured['convention']``); None for throughput-only rows."""
        return self.measured["mfu"]


class _Row:
    """Checks bound to one row, so every message names the file and the row id."""
    def __init__(self, where: str, rid: str):
        self.where, self.rid = where, rid

    def fail(self, fld: str, expected: str, got: Any) -> LayoutDataError:
        return LayoutDataError(f"{self.where}: run {self.rid!r}: {fld}: expected {expected}, got {got!r}")

    def positive_int(self, value: Any, fld: str, nullable: bool = True) -> int | None:
        if value is None and nullable:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.fail(fld, "a positive integer" + (" or null" if nullable else ""), value)
        return value

    def positive(self, value: Any, fld: str, fraction: bool = False) -> float:
        top = 1.0 if fraction else float("inf")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= top or value == float("inf"):
            raise self.fail(fld, "a fraction in (0, 1]" if fraction else "a positive finite number", value)
        return float(value)

    def choice(self, value: Any, fld: str, options: tuple, nullable: bool = True) -> Any:
        if (value is None and nullable) or value in options:
            return value
        raise self.fail(fld, "one of " + ", ".join(map(str, options)) + (" or null" if nullable else ""), value)

    def text(self, raw: Mapping[str, Any], key: str, fld: str | None = None) -> str:
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(fld or key, "a non-empty string", value)
        return value


def _architecture(row: _Row, raw: Any) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise row.fail("architecture", "a mapping", raw)
    unknown = sorted(set(raw) - {*ARCH_INTS, *ARCH_OPTIONAL, *ARCH_COUNTS, "glu", "source"})
    if unknown:
        raise row.fail(f"architecture.{unknown[0]}", "a known architecture key", unknown[0])
    out: dict[str, Any] = {}
    for key in ARCH_INTS:
        if key not in raw:
            raise row.fail(f"architecture.{key}", "the key (null where unknown)", "missing")
        out[key] = row.positive_int(raw[key], f"architecture.{key}", nullable=key not in ("layers", "d_model"))
    for key in ARCH_OPTIONAL:
        out[key] = row.positive_int(raw.get(key), f"architecture.{key}")
    for key in ARCH_COUNTS:
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise row.fail(f"architecture.{key}", "a non-negative integer", value)
        out[key] = value
    if out["experts"] is not None:
        if out["experts_active"] is None or out["experts_active"] > out["experts"]:
            raise row.fail("architecture.experts_active", f"an integer in [1, experts ({out['experts']})]",
                           out["experts_active"])
        if out["dense_layers"] >= out["layers"]:
            raise row.fail("architecture.dense_layers", f"fewer than layers ({out['layers']})", out["dense_layers"])
    elif out["experts_active"] is not None or out["shared_experts"] or out["moe_ffn"] is not None:
        raise row.fail("architecture.experts", "the routed expert count where any expert field is given", None)
    out["glu"] = row.choice(raw.get("glu"), "architecture.glu", (True, False), nullable=False)
    out["source"] = row.text(raw, "source", "architecture.source")
    return MappingProxyType(out)


def _layout(row: _Row, raw: Any, count: int) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise row.fail("layout", "a mapping", raw)
    if set(raw) - set(LAYOUT_KEYS):
        raise row.fail(f"layout.{min(set(raw) - set(LAYOUT_KEYS))}", "one of " + ", ".join(LAYOUT_KEYS), min(set(raw) - set(LAYOUT_KEYS)))
    lay: dict[str, Any] = {k: row.positive_int(raw.get(k), f"layout.{k}") for k in DEGREES}
    lay["recompute"] = row.choice(raw.get("recompute"), "layout.recompute", RECOMPUTE)
    lay["schedule"] = row.choice(raw.get("schedule"), "layout.schedule", SCHEDULES)
    lay["zero"] = raw.get("zero")
    if lay["zero"] is not None and (isinstance(lay["zero"], bool) or lay["zero"] not in (0, 1, 2, 3)):
        raise row.fail("layout.zero", "one of 0, 1, 2, 3 or null", lay["zero"])
    for key in ("fsdp", "sequence_parallel", *OVERLAP_FLAGS):
        lay[key] = row.choice(raw.get(key), f"layout.{key}", (True, False))
    # tp*pp*dp*cp is the job (dp counts FSDP/ZeRO shards too). The expert layers regroup a pipeline stage's
    # tp*dp*cp ranks as ep x etp x edp (Megatron-Core's MoE parallel folding, Liu et al. 2025, arXiv 2504.14960;
    # expert_tensor_parallel_size defaults to tensor_model_parallel_size), so ep*etp divides tp*dp*cp,
    # and with etp unstated (= tp) ep divides dp*cp.
    degrees = [lay[k] for k in ("tp", "pp", "dp", "cp")]
    if None not in degrees and degrees[0] * degrees[1] * degrees[2] * degrees[3] != count:
        raise row.fail("layout", f"tp*pp*dp*cp == count ({count})", "x".join(map(str, degrees)))
    if lay["ep"] is not None and lay["dp"] is not None:
        tp, etp = lay["tp"] or 1, lay["etp"] or lay["tp"] or 1
        ranks = tp * lay["dp"] * (lay["cp"] or 1)
        if ranks % (lay["ep"] * etp):
            raise row.fail("layout.ep", "ep*etp dividing tp*dp*cp" if lay["etp"] else "a divisor of dp*cp", lay["ep"])
        if lay["edp"] is not None and lay["ep"] * etp * lay["edp"] != ranks:
            raise row.fail("layout.edp", f"ep*etp*edp == tp*dp*cp ({ranks})", lay["edp"])
    elif lay["ep"] is None and (lay["etp"] is not None or lay["edp"] is not None):
        raise row.fail("layout.ep", "the expert-parallel degree where etp or edp is given", lay["ep"])
    mb, gb = lay["micro_batch"], lay["global_batch"]
    if mb is not None and gb is not None and mb > gb:
        raise row.fail("layout.micro_batch", f"at most global_batch ({gb})", mb)
    return MappingProxyType(lay)


def _measured(row: _Row, raw: Any, acc: hardware.Accelerator, precision: str | None) -> Mapping[str, Any]:
    if not isinstance(raw, dict):
        raise row.fail("measured", "a mapping", raw)
    known = {*MEASURED_FRACTIONS, *MEASURED_POSITIVE, "convention"}
    if set(raw) - known:
        raise row.fail(f"measured.{min(set(raw) - known)}", "one of " + ", ".join(sorted(known)), min(set(raw) - known))
    out: dict[str, Any] = {}
    for key in (*MEASURED_FRACTIONS, *MEASURED_POSITIVE):
        out[key] = None if raw.get(key) is None else row.positive(raw[key], f"measured.{key}", key in MEASURED_FRACTIONS)
    out["convention"] = row.choice(raw.get("convention"), "measured.convention", PUBLISHED,
                                   nullable=out["mfu"] is None)
    if out["mfu"] is None and out["tokens_per_s_per_gpu"] is None and out["tflops_per_gpu"] is None:
        raise row.fail("measured", "mfu, tflops_per_gpu or tokens_per_s_per_gpu", raw)
    peak = acc.peak(precision or ("bf16" if "bf16" in acc.peak_flops else "fp16"))
    if out["tflops_per_gpu"] is not None and out["tflops_per_gpu"] * 1e12 > peak:
        raise row.fail("measured.tflops_per_gpu", f"at most the {acc.id} peak ({peak / 1e12:g})", out["tflops_per_gpu"])
    return MappingProxyType(out)


def _run(where: str, raw: Any, index: int) -> LayoutRun:
    rid = raw.get("id") if isinstance(raw, dict) else None
    row = _Row(where, rid if isinstance(rid, str) and rid else f"#{index}")
    if not isinstance(raw, dict):
        raise row.fail("row", "a mapping", raw)
    missing, unknown = [k for k in REQUIRED if k not in raw], [k for k in raw if k not in (*REQUIRED, *OPTIONAL)]
    if missing or unknown:
        raise row.fail(missing[0] if missing else unknown[0], "the key" if missing else "a known row key", "missing" if missing else unknown[0])
    texts = {k: row.text(raw, k) for k in ("id", "series", "model", "source", "licence", "obtained")}
    acc_id = raw["accelerator"]
    try:
        acc = hardware.get(str(acc_id))
    except hardware.HardwareError as err:
        raise row.fail("accelerator", "a key of accelerators.yaml", acc_id) from err
    if acc.id != acc_id:
        raise row.fail("accelerator", f"the catalogue id {acc.id!r}, not an alias", acc_id)
    precision = row.choice(raw["precision"], "precision", PRECISIONS)
    if precision is not None and precision not in acc.peak_flops:
        raise row.fail("precision", f"a precision {acc.id} has a peak for ({', '.join(acc.precisions)})", precision)
    count = row.positive_int(raw["count"], "count", nullable=False)
    params = raw["params"]
    if not isinstance(params, dict) or set(params) - {"total", "active"}:
        raise row.fail("params", "a mapping of total (and active)", params)
    total = row.positive(params.get("total"), "params.total")
    active = row.positive(params.get("active", total), "params.active")
    if active > total:
        raise row.fail("params.active", f"at most params.total ({total:g})", active)
    memory = raw.get("memory_gb")
    fit = raw.get("fit", True)
    if not isinstance(fit, bool):
        raise row.fail("fit", "true or false", fit)
    reason = str(raw.get("fit_reason") or "")
    if not fit and not reason.strip():
        raise row.fail("fit_reason", "why the row is kept out of the fit (a non-empty string)", raw.get("fit_reason"))
    return LayoutRun(
        id=texts["id"], kind=row.choice(raw["kind"], "kind", KINDS, nullable=False), series=texts["series"],
        model=texts["model"], architecture=_architecture(row, raw["architecture"]),
        params=MappingProxyType({"total": total, "active": active}),
        accelerator=acc.id, precision=precision, count=count, layout=_layout(row, raw["layout"], count),
        measured=_measured(row, raw["measured"], acc, precision), source=texts["source"],
        status=row.choice(raw["status"], "status", STATUSES, nullable=False), licence=texts["licence"],
        obtained=texts["obtained"], notes=str(raw.get("notes") or ""),
        memory_gb=None if memory is None else row.positive(memory, "memory_gb"), fit=fit, fit_reason=reason)


def _read(path: str | Path | None) -> tuple[str, dict]:
    from ruamel.yaml import YAML

    where = _DATA if path is None else str(path)
    res = importlib.resources.files("mcflops").joinpath("data", _DATA) if path is None else Path(path)
    doc = YAML(typ="safe").load(res.read_text("utf-8"))
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise LayoutDataError(f"{where}: expected 'schema: {SCHEMA}'")
    if not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise LayoutDataError(f"{where}: runs: expected a non-empty list")
    return where, doc


@functools.cache
def _shipped() -> tuple[LayoutRun, ...]:
    return _parse(*_read(None))


def _parse(where: str, doc: dict) -> tuple[LayoutRun, ...]:
    runs = tuple(_run(where, raw, i) for i, raw in enumerate(doc["runs"]))
    seen: set[str] = set()
    for run in runs:
        if run.id in seen:
            raise LayoutDataError(f"{where}: run {run.id!r}: id: expected a unique id, got a duplicate")
        seen.add(run.id)
    return runs


def load_layout_runs(path: str | Path | None = None) -> list[LayoutRun]:
    """Every row of ``path`` (default: the shipped file, parsed once), validated; raises LayoutDataError."""
    return list(_shipped() if path is None else _parse(*_read(path)))


def benchmark_rows(path: str | Path | None = None) -> list[LayoutRun]:
    """The fitting set: rows of kind ``benchmark`` the layout model takes (``fit`` not false)."""
    return [r for r in load_layout_runs(path) if r.kind == "benchmark" and r.fit]


def production_rows(path: str | Path | None = None) -> list[LayoutRun]:
    """The held-out validation set: rows of kind ``production`` (never fitted to) the layout model takes."""
    return [r for r in load_layout_runs(path) if r.kind == "production" and r.fit]


def unfitted_rows(path: str | Path | None = None) -> list[LayoutRun]:
    """Rows kept out of the fit and its validation (``fit: false``), each with its ``fit_reason``: measured data
    the current layout model cannot yet take (e.g. mixtures of experts), there for the model that can."""
    return [r for r in load_layout_runs(path) if not r.fit]
