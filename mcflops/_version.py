"""The version of mcflops and of what made a run, from the installed packages' metadata (nothing imported)."""

from __future__ import annotations

import functools


@functools.cache
def version() -> str:
    """mcflops's version, read once per process: each read of the metadata scans every folder on sys.path,
    and a run asks for it in several places (summary.json, the report, every PNG's metadata)."""
    from importlib.metadata import PackageNotFoundError, version as v

    try:
        return v("mcflops")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


def versions() -> dict[str, str | None]:
    """The versions that made a run (summary.json "versions"): mcflops, Python, JAX, jaxlib, NumPy.

    Read from the installed packages' metadata, so nothing is imported; None for one not installed."""
    import platform
    from importlib.metadata import PackageNotFoundError, version as v

    found: dict[str, str | None] = {"mcflops": version(), "python": platform.python_version()}
    for name in ("jax", "jaxlib", "numpy"):
        try:
            found[name] = v(name)
        except PackageNotFoundError:
            found[name] = None
    return found


