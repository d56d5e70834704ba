"""The API's keyword arguments checked where they come in, as a prior file's fields are: one UsageError naming
the function and the argument (``mcflops.run(samples=): expected a whole number ..., got 1000.5``), never an
exception from deep inside (pathlib, JAX's key types, numpy) and never a value silently rounded (a seed of
1.5 recorded as 1). The command line hands its flags to these functions and prints the same error with the
flag's name (:meth:`UsageError.as_flag`), so one check speaks both languages."""

from __future__ import annotations

import functools
import math
from numbers import Integral, Real
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from mcflops.errors import SpecError, UsageError, kind
from mcflops.spec import Spec, check_samples
from mcflops.spec.options import flag

NUTS_KEYS = {"chains": 1, "warmup": 1, "draws": 1}  # NUTS's run size, and the least each may be


class Call:
    """The argument checks of one API call: ``Call("run").whole(samples, "samples", 1000)``."""

    def __init__(self, fn: str):
        self.fn = fn

    def label(self, arg: str) -> str:
        """How a message names the argument: ``mcflops.run(samples=)``."""
        return f"mcflops.{self.fn}({arg}=)"

    def error(self, arg: str, message: str) -> UsageError:
        return UsageError(message, arg=arg, fn=self.fn, flag=flag(arg))

    def spec(self, spec: Any) -> Spec:
        """A Spec, a prior file's path (str or Path) or a mapping (a notebook's dict), loaded."""
        from mcflops.spec import load_spec

        if isinstance(spec, Spec):
            return spec
        if isinstance(spec, (str, Path, Mapping)) and not (isinstance(spec, str) and not spec.strip()):
            return load_spec(spec)
        raise self.error("spec", f"expected a prior file's path, a mapping or a Spec, got {kind(spec)}")

    def whole(self, value: Any, arg: str, lo: int, hi: int | None = None, what: str = "") -> int:
        """A whole number in [lo, hi]: an int, or a float with no fraction (``1e6``); not a bool, not text.
        ``what`` names the part of the argument (a key of a mapping) in the message."""
        ok = not isinstance(value, bool) and (isinstance(value, Integral) or (
            isinstance(value, Real) and math.isfinite(value) and float(value).is_integer()))
        if not ok:
            raise self.error(arg, f"{what}expected a whole number, got {kind(value)}")
        n = int(value)
        if n < lo or (hi is not None and n > hi):
            span = f"from {lo:,} to {hi:,}" if hi is not None else f"of at least {lo:,}"
            raise self.error(arg, f"{what}expected a whole number {span}, got {n:,}")
        return n

    def samples(self, value: Any) -> int:
        n = self.whole(value, "samples", 0)
        check_samples(n, lambda m, *a: self.error("samples", m))
        return n

    def seed(self, value: Any) -> int:
        n = self.whole(value, "seed", -(2**1024))  # whole first: 1.5 and True are not seeds
        if not 0 <= n < 2**63:  # a prior file's seed: has the same bounds (the key takes 63 bits)
            raise self.error("seed", f"expected a seed from 0 to 2**63 - 1, got {n}")
        return n

    def flag(self, value: Any, arg: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(arg, f"expected True or False, got {kind(value)}")
        return value

    def choice(self, value: Any, arg: str, options: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in options:
            raise self.error(arg, f"expected one of {', '.join(map(repr, options))}, got {kind(value)}")
        return value

    def callback(self, value: Any, arg: str):
        if value is not None and not callable(value):
            raise self.error(arg, f"expected a function or None, got {kind(value)}")
        return value

    def key(self, value: Any):
        """None, a typed JAX key (``jax.random.key(0)``) or raw key data (``jax.random.PRNGKey(0)``), as one key."""
        if value is None:
            return None
        import jax
        import numpy as np

        if not isinstance(value, (jax.Array, np.ndarray)):
            raise self.error("key", f"expected a JAX key (jax.random.key(0)), got {kind(value)}")
        arr = jax.numpy.asarray(value)
        if jax.dtypes.issubdtype(arr.dtype, jax.dtypes.prng_key):
            if arr.shape != ():
                raise self.error("key", f"expected one key, got an array of keys of shape {arr.shape}")
            return arr
        if arr.dtype == np.uint32 and arr.shape == (2,):  # jax.random.PRNGKey's raw data (threefry)
            return jax.random.wrap_key_data(arr)
        raise self.error("key", f"expected a JAX key (jax.random.key(0)), got an array of {arr.dtype} "
                                f"of shape {arr.shape}")

    def nuts(self, value: Any) -> dict[str, int]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error("nuts", f"expected a mapping of {', '.join(NUTS_KEYS)}, got {kind(value)}")
        out = {}
        for k, v in value.items():
            if k not in NUTS_KEYS:
                raise self.error("nuts", f"unknown key {k!r} (expected {', '.join(NUTS_KEYS)})")
            out[k] = self.whole(v, "nuts", NUTS_KEYS[k], 100_000, what=f"{k}: ")
        return out


F = TypeVar("F", bound=Callable[..., Any])


def speaking(fn: F) -> F:
    """An API function whose argument errors, wherever below they are raised, name its own arguments: a
    UsageError from a lower layer (``couple=: ...``) gets the function (``mcflops.compare(couple=): ...``), and
    the SpecError of a command-line value checked against the file (``spec.plan_options``, which names the
    argument by :meth:`Call.label`) becomes the UsageError it is, so the command line can name the flag."""
    prefix = f"mcflops.{fn.__name__}("

    @functools.wraps(fn)
    def called(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except UsageError as e:
            raise (e if e.fn else e.called(fn.__name__)) from None
        except SpecError as e:
            if e.line is not None or not (e.field or "").startswith(prefix):
                raise
            arg, _, item = e.field[len(prefix):].partition("=)")
            raise UsageError(e.message, arg=arg, fn=fn.__name__, flag=flag(arg), item=item, path=e.path) from None

    return called  # type: ignore[return-value]
