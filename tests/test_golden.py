"""Every prior file in priors/ gives the summary.json it gave before the package was reorganised into layers:
the stored copies in tests/golden/ were made by the flat package (tests/golden/make.py), and only the
version, the device, the timings and the measured seconds may differ. A change that is meant to move the numbers
regenerates them and says why.

Each number is compared at the precision it has, so that the stored copies hold on any x86-64 CPU (`.ci/run`
also runs this file with NumPy and XLA held to AVX2, tests/simd.py):

- Text, integers, booleans and the spec hash: exactly (the hash names what the file means on any machine,
  tests/spec/test_hash.py).
- A float64 value computed on the host (the architecture's counts, the napkin chain, the weighted quantiles
  and moments of the draws, the tornado and the sweeps): to RTOL_HOST. The draws themselves are the same bits
  on every path (elementwise float32); what a SIMD path changes is libm's last bit and the order NumPy adds
  in, 1e-16 to 3e-12 relative as measured (a root-finder's solution amplifies it). 1e-9 leaves a margin of
  300x over that and is a millionth of the smallest change a changed formula or stream makes.
- A statistic that adds float32 values in an order the SIMD width decides (log-space moments and
  correlations, the Sobol and Shapley sums): within K_MCSE of its own Monte Carlo standard error. Its
  float32 rounding (measured: at most 0.01 MCSE) tells a reader nothing, while any change to the draws
  moves an estimate by about sqrt(2) MCSE, so 0.1 MCSE misses such a change with probability 5.6% per
  number, and a summary has dozens of them.
- A standard error (an MCSE, a Sobol or Shapley index's se): to RTOL_SE. A standard error is quoted to two
  digits; the delta-method se of the input that carries most of the variance is a near-cancelling
  difference (Var(q)/V^2 - 2q Cov(q, V)/V^3 + q^2 Var(V)/V^4), so float32 summation order moves it by up
  to 0.4% (measured); its own Monte Carlo error is larger still (1/sqrt(2n) = 0.3% at n = 65,536, more with
  the fourth moments it depends on)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.golden.make import summary

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = GOLDEN.parents[1]
VOLATILE = {"timings", "seconds", "version", "versions", "device"}  # how long it took, which build and machine made it
RTOL_HOST = 1e-9
K_MCSE = 0.1
RTOL_SE = 2e-2
SE_FIELDS = {"se", "first_se", "total_se"}
LOG_SD_FIELDS = {"log_sd", "log_sd_mfu", "log_sd_goodput", "prior_log_sd", "prior_log_sd_mfu", "prior_log_sd_goodput"}
CORR_FIELDS = {"corr_log", "corr_mfu_goodput_log"}


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _draws(doc: dict, path: tuple) -> float:
    """The number of (effective) draws behind the statistic at ``path``: the posterior's ESS, the prior's
    sample count, or the kept draws a correlation table was computed from (the fewest: the loosest bound)."""
    if path[0] == "posterior" and not str(path[-1]).startswith("prior_"):
        return float(doc["posterior"]["ess"])
    if path[:2] == ("sensitivity", "correlations"):
        return float(doc["sensitivity"]["correlations"][path[2]]["spearman_draws"])
    return float(doc["samples"])


def tolerance(doc: dict, path: tuple, want: float) -> float:
    """The absolute difference allowed at ``path`` of the stored summary ``doc`` (the module's docstring says why)."""
    leaf, parent = path[-1], path[:-1]
    host = RTOL_HOST * abs(want)
    if leaf in SE_FIELDS or str(leaf).startswith("mcse_"):
        return RTOL_SE * abs(want)
    if len(path) >= 3 and str(path[1]).startswith(("sobol", "shapley")) and leaf in ("first", "total", "effect"):
        se = _at(doc, parent)["first_se" if leaf == "first" else "total_se" if leaf == "total" else "se"]
        return max(host, K_MCSE * se)
    if leaf in LOG_SD_FIELDS:
        return max(host, K_MCSE * abs(want) / math.sqrt(2 * _draws(doc, path)))  # sd's MCSE: sd / sqrt(2n)
    if leaf == "log_mean":
        return max(host, K_MCSE * _at(doc, parent)["log_sd"] / math.sqrt(_draws(doc, path)))
    if leaf in CORR_FIELDS or (len(path) >= 4 and path[:2] == ("sensitivity", "correlations")):
        return max(host, K_MCSE * (1 - want * want) / math.sqrt(_draws(doc, path)))  # r's MCSE: (1 - r^2) / sqrt(n)
    return host


def _diff(got, want, doc, where=()) -> list[str]:
    """Paths where ``got`` differs from the stored ``want`` by more than the tolerance at that path."""
    if isinstance(got, dict) and isinstance(want, dict):
        out = [f"{'.'.join(map(str, where + (k,)))}: only in one" for k in set(got) ^ set(want)]
        for k in set(got) & set(want):
            out += _diff(got[k], want[k], doc, where + (k,))
        return out
    if isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            return [f"{'.'.join(map(str, where))}: length {len(got)} != {len(want)}"]
        # a list of numbers (an HDI, a sweep) shares its parent's tolerance rule
        return [d for i, (x, y) in enumerate(zip(got, want)) for d in _diff(x, y, doc, where if _number(y) else where + (i,))]
    if _number(got) and _number(want) and (isinstance(got, float) or isinstance(want, float)):
        if math.isnan(want) or math.isnan(got):
            return [] if math.isnan(want) and math.isnan(got) else [f"{'.'.join(map(str, where))}: {got!r} != {want!r}"]
        tol = tolerance(doc, where, want)
        if abs(got - want) <= tol:
            return []
        return [f"{'.'.join(map(str, where))}: {got!r} != {want!r} (tolerance {tol:.3g})"]
    return [] if got == want else [f"{'.'.join(map(str, where))}: {got!r} != {want!r}"]


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@pytest.mark.parametrize("name", sorted(p.stem for p in GOLDEN.glob("*.json")))
def test_summary_is_unchanged(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the stored copies name their prior files relative to the repository
    got = _strip(json.loads(json.dumps(summary(Path("priors") / f"{name}.yaml"))))
    want = _strip(json.loads((GOLDEN / f"{name}.json").read_text()))
    # importance sampling throughout: a NUTS chain is chaotic in its last bits, so a stored NUTS posterior
    # could only be compared within its MCSE (as tests/calibration/test_shipped_fit.py does)
    assert (want.get("posterior") or {}).get("method", "importance") == "importance"
    diffs = _diff(got, want, want)
    assert not diffs, "\n".join(sorted(diffs)[:20])


def test_the_tolerances_are_tight_enough_to_see_a_changed_draw():
    """The classes above, applied to a stored summary, allow less than a changed draw would move: a
    statistic's tolerance is at most K_MCSE of its MCSE, a host value's a billionth of it."""
    doc = json.loads((GOLDEN / "llama405b.json").read_text())
    post = doc["posterior"]["mfu"]
    assert tolerance(doc, ("posterior", "mfu", "mean"), post["mean"]) < 1e-8 * post["mean"]
    assert tolerance(doc, ("posterior", "mfu", "log_sd"), post["log_sd"]) < 0.1 * post["log_sd"] / math.sqrt(
        2 * doc["posterior"]["ess"]) * 1.0001
    sob = doc["sensitivity"]["sobol"]["mfu"]
    assert tolerance(doc, ("sensitivity", "sobol", "mfu", "first"), sob["first"]) == pytest.approx(0.1 * sob["first_se"])
    assert _diff({"x": {"log_sd": 0.1 + 1e-3}}, {"x": {"log_sd": 0.1}}, {"samples": 100_000, "x": {}})
    assert not _diff({"x": {"log_sd": 0.1 + 1e-6}}, {"x": {"log_sd": 0.1}}, {"samples": 100_000, "x": {}})


def test_every_prior_file_has_a_stored_summary():
    assert sorted(p.stem for p in (ROOT / "priors").glob("*.yaml")) == sorted(p.stem for p in GOLDEN.glob("*.json"))
