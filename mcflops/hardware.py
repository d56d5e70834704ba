"""Accelerator catalogue: dense peak FLOP/s, TDP, memory and interconnect per chip, as cited data.

The figures live in ``mcflops/data/accelerators.yaml`` (each entry carries its ``source``).
This module only loads, validates and looks them up; it imports no JAX.
"""

from __future__ import annotations

import difflib
import functools
import importlib.resources
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["PRECISIONS", "Accelerator", "HardwareError", "catalogue", "get"]

PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")
_SCHEMA = "accelerators_v1"
_DATA = "accelerators.yaml"


class HardwareError(ValueError):
    """Unknown accelerator or precision, or a malformed catalogue."""


@dataclass(frozen=True)
class Accelerator:
    """One accelerator chip; ``peak_flops`` are dense (no sparsity) FLOP/s per chip."""

    id: str
    name: str
    vendor: str
    tdp_w: float | None
    peak_flops: Mapping[str, float] = field(hash=False)
    memory_gb: float
    source: str
    year: int | None = None
    aliases: tuple[str, ...] = ()
    # Interconnect, per chip and per direction, in GB/s (1e9 bytes/s); None where the catalogue
    # has no sourced figure (TPUs, parts without a reference cluster design).
    nvlink_gb_s: float | None = None
    nvlink_domain: int | None = None
    network_gb_s: float | None = None
    ici_gb_s: float | None = None
    hbm_gb_s: float | None = None  # memory bandwidth per chip (GB/s): the MoE permutation's time

    @property
    def precisions(self) -> tuple[str, ...]:
        """Precisions this part has a published peak for, in ``PRECISIONS`` order."""
        return tuple(p for p in PRECISIONS if p in self.peak_flops)

    def peak(self, precision: str) -> float:
        """Dense peak FLOP/s at ``precision``; raises ``HardwareError`` if the part lacks it."""
        key = precision.strip().lower()
        if key in self.peak_flops:
            return self.peak_flops[key]
        avail = ", ".join(self.precisions)
        if key not in PRECISIONS:
            raise HardwareError(
                f"unknown precision {precision!r}; expected one of {', '.join(PRECISIONS)} "
                f"({self.id} has: {avail})"
            )
        raise HardwareError(
            f"accelerator {self.id!r} has no {key} peak in the catalogue; available: {avail}"
        )


def _norm(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def _float(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise HardwareError(f"{_DATA}: {where}: expected a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise HardwareError(f"{_DATA}: {where}: expected a number, got {value!r}") from None
    if not out > 0 or out == float("inf"):
        raise HardwareError(f"{_DATA}: {where}: expected a positive finite number, got {value!r}")
    return out


def _optional_float(raw: Mapping[str, Any], key: str, where: str) -> float | None:
    value = raw.get(key)
    return None if value is None else _float(value, f"{where}.{key}")


def _optional_count(raw: Mapping[str, Any], key: str, where: str) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HardwareError(f"{_DATA}: {where}.{key}: expected a positive integer, got {value!r}")
    return value


def _parse(acc_id: str, raw: Mapping[str, Any]) -> Accelerator:
    where = f"accelerators.{acc_id}"
    for key in ("name", "vendor", "peak_flops", "memory_gb", "source"):
        if key not in raw:
            raise HardwareError(f"{_DATA}: {where}: missing field {key!r}")
    if not str(raw["source"]).strip():
        raise HardwareError(f"{_DATA}: {where}: empty source")
    peaks = {}
    for prec, val in dict(raw["peak_flops"]).items():
        if prec not in PRECISIONS:
            raise HardwareError(
                f"{_DATA}: {where}.peak_flops: unknown precision {prec!r}; "
                f"expected one of {', '.join(PRECISIONS)}"
            )
        peaks[prec] = _float(val, f"{where}.peak_flops.{prec}")
    tdp = raw.get("tdp_w")
    return Accelerator(
        id=acc_id,
        name=str(raw["name"]),
        vendor=str(raw["vendor"]),
        tdp_w=None if tdp is None else _float(tdp, f"{where}.tdp_w"),
        peak_flops=MappingProxyType({p: peaks[p] for p in PRECISIONS if p in peaks}),
        memory_gb=_float(raw["memory_gb"], f"{where}.memory_gb"),
        source=" ".join(str(raw["source"]).split()),
        year=None if raw.get("year") is None else int(raw["year"]),
        aliases=tuple(_norm(str(a)) for a in raw.get("aliases") or ()),
        nvlink_gb_s=_optional_float(raw, "nvlink_gb_s", where),
        nvlink_domain=_optional_count(raw, "nvlink_domain", where),
        network_gb_s=_optional_float(raw, "network_gb_s", where),
        ici_gb_s=_optional_float(raw, "ici_gb_s", where),
        hbm_gb_s=_optional_float(raw, "hbm_gb_s", where),
    )


@functools.cache
def _load() -> tuple[Mapping[str, Accelerator], Mapping[str, str]]:
    from ruamel.yaml import YAML

    text = importlib.resources.files("mcflops").joinpath("data", _DATA).read_text("utf-8")
    doc = YAML(typ="safe").load(text)
    if not isinstance(doc, dict) or doc.get("schema") != _SCHEMA:
        raise HardwareError(f"{_DATA}: expected 'schema: {_SCHEMA}'")
    accs = {_norm(str(k)): _parse(_norm(str(k)), v) for k, v in doc["accelerators"].items()}
    names: dict[str, str] = {k: k for k in accs}
    for acc in accs.values():
        for alias in acc.aliases:
            if names.setdefault(alias, acc.id) != acc.id:
                raise HardwareError(f"{_DATA}: alias {alias!r} used by two accelerators")
    return MappingProxyType(accs), MappingProxyType(names)


def catalogue() -> Mapping[str, Accelerator]:
    """All accelerators by id, in catalogue-file order (read-only)."""
    return _load()[0]


def get(id_or_alias: str) -> Accelerator:
    """Look up an accelerator by id or alias (case-, space- and underscore-insensitive)."""
    accs, names = _load()
    key = _norm(str(id_or_alias))
    if key in names:
        return accs[names[key]]
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
    hint = f"; did you mean {names[close[0]]!r}?" if close else ""
    raise HardwareError(
        f"unknown accelerator {id_or_alias!r}{hint} (known: {', '.join(sorted(accs))})"
    )
