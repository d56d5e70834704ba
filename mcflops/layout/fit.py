"""The shipped efficiency priors (``mcflops/data/layout_fit.json``): the calibration's output, read once."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

FIT = Path(__file__).resolve().parents[1] / "data" / "layout_fit.json"


@lru_cache(maxsize=1)
def load_fit() -> Mapping[str, Any]:
    """{"default": {param: prior in the file grammar}, "accelerator": {id: {param: prior}}, ...}."""
    with open(FIT, encoding="utf-8") as f:
        return json.load(f)
