"""The spec hash names what a file means, so it is the same on every machine: every file in priors/ hashes
alike in this process and in one held to the other SIMD paths (tests/simd.py), where the solved
parameters it resolves to differ in their last bits; and it still tells two files apart that differ in
any number they state, however little."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcflops.spec import load_spec
from tests.simd import avx2_env

ROOT = Path(__file__).resolve().parents[2]
PRIORS = sorted((ROOT / "priors").glob("*.yaml"))
CHILD = """
import json, sys
from mcflops.spec import load_spec
from mcflops.spec.resolved import resolved_dict
out = {}
for p in sys.argv[1:]:
    s = load_spec(p)
    out[p] = [s.digest(), resolved_dict(s)]
print(json.dumps(out))
"""


def test_every_prior_file_hashes_alike_on_the_other_simd_path():
    env = avx2_env({**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT)})
    done = subprocess.run([sys.executable, "-c", CHILD, *map(str, PRIORS)], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    there = json.loads(done.stdout)
    assert sorted(there) == sorted(map(str, PRIORS))
    for p in PRIORS:
        assert load_spec(p).digest() == there[str(p)][0], p.name


def test_a_stated_number_changes_the_hash(tmp_path):
    base = (ROOT / "priors" / "llama405b.yaml").read_text()
    assert "value: 30.84e6" in base
    moved = tmp_path / "llama405b.yaml"
    moved.write_text(base.replace("value: 30.84e6", "value: 30.8400001e6"))  # 3e-9 relative: the 9th digit
    assert load_spec(moved).digest() != load_spec(ROOT / "priors" / "llama405b.yaml").digest()
