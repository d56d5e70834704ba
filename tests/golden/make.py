"""Regenerate the stored summaries that tests/test_golden.py compares against.

    .venv/bin/python -m tests.golden.make

Run it only when a change is meant to move the numbers (and say why in the commit): the point of the
stored copies is that a change of structure leaves every prior file's summary.json as it was.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SAMPLES = 100_000  # enough for every posterior to be importance sampling or NUTS as at full size, cheap to rerun


def summary(path: Path, seed: int | None = None) -> dict:
    """summary.json of `mcflops run path --samples SAMPLES` (the CLI's computation, without the files); ``seed``
    in place of the file's."""
    import mcflops

    res = mcflops.run(path, samples=SAMPLES, sensitivity=True, seed=seed)
    return res.to_dict()


def main() -> int:
    import os

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    for path in sorted((ROOT / "priors").glob("*.yaml")):
        data = summary(path.relative_to(ROOT) if Path.cwd() == ROOT else path)
        (HERE / f"{path.stem}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(path.name, data["prior"]["gpu_hours"]["p50"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
