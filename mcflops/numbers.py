"""Numbers as people write them in prior files: ``405.9e9``, ``1_000_000``, ``405B``, ``15.6T``, ``30.84M``.

A YAML 1.1 loader reads ``405.9e9`` as a string and YAML 1.2 reads ``15.6T`` as one; both reach
here as text and become floats. Suffixes are SI-like counts, the way model cards write them
(K = 1e3, M = 1e6, B or G = 1e9, T = 1e12, P = 1e15), in either case: people write ``15t`` and ``70b``
as often as ``15T`` and ``70B``, and a count has no use for milli or pico, so ``5m`` is 5 million.
"""

from __future__ import annotations

import math
import re

_UPPER = {"K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
SUFFIXES = {**_UPPER, **{k.lower(): v for k, v in _UPPER.items()}}
# A number as text: the pattern the loader reads and the JSON Schema states (ECMA-262 and Python agree on it).
NUMBER_PATTERN = (r"^([+-]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?)\s*(["
                  + "".join(SUFFIXES) + "]?)$")
_NUMBER = re.compile(NUMBER_PATTERN)


def parse_number(value: object) -> float | None:
    """The float a YAML scalar stands for, or None if it is not a number (bools are not numbers).

    NumPy scalars and one-element arrays count as the number they hold: a notebook's sweep makes them."""
    value = python_scalar(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            out = float(value)
        except OverflowError:  # an int beyond float range (10**400)
            return None
        return out if math.isfinite(out) else None
    if isinstance(value, str):
        m = _NUMBER.match(value.strip())
        if not m:
            return None
        mantissa = m.group(1).replace("_", "")
        try:
            out = float(mantissa) * SUFFIXES.get(m.group(2), 1.0)
        except ValueError:
            return None
        return out if math.isfinite(out) else None
    return None


def python_scalar(value: object) -> object:
    """A NumPy scalar or one-element array as the Python scalar it holds (``np.int64(4096)`` -> 4096,
    ``np.array([0.4])`` -> 0.4, ``np.bool_`` -> bool); anything else unchanged. Duck-typed (``.item()`` and a
    size of one), so reading a prior file does not import NumPy."""
    item = getattr(value, "item", None)
    if item is None or isinstance(value, (str, bytes)) or getattr(value, "size", None) != 1:
        return value
    try:
        out = item()
    except (TypeError, ValueError):
        return value
    return out if isinstance(out, (bool, int, float, str)) else value


def format_number(x: float, digits: int = 4) -> str:
    """Compact human form with ``digits`` significant digits: 3.8e25 -> '3.80e25', 30840000 -> '30.84M',
    0.3458 -> '0.3458', 0.0000512 -> '5.12e-5'."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    ax = abs(x)
    if ax >= 1e15 or ax < 1e-3:
        mant, exp = f"{x:.{digits - 1}e}".split("e")
        return f"{mant}e{int(exp)}"
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3), ("", 1.0)):
        if ax >= scale:
            return _significant(x / scale, digits) + suffix
    return _significant(x, digits)


def _significant(v: float, digits: int) -> str:
    decimals = max(digits - 1 - math.floor(math.log10(abs(v))), 0)
    return f"{v:.{decimals}f}"
