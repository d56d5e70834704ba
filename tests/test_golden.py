"""Every prior file in priors/ gives the summary.json it gave before the package was reorganised into layers:
the stored copies in tests/golden/ were made by the flat package (tests/golden/make.py), and only the
version, the device, the timings and the measured seconds may differ. A change that is meant to move the numbers
regenerates them and says why.

Each number is compared at the precision it has, so that the stored copies hold on any x86-64 CPU and any
build of JAX that keeps its random bits (`.ci/run` also runs this file with NumPy and XLA held to AVX2,
tests/simd.py):

- Text, integers, booleans and the spec hash: exactly (the hash names what the file means on any machine,
  tests/spec/test_hash.py).
- A float64 value the draws do not enter (the architecture's counts, the napkin chain, the tornado's ends):
  to RTOL_HOST. What a SIMD path changes there is libm's last bit and the order NumPy adds in, 1e-16 to 3e-12
  relative as measured (a root-finder's solution amplifies it); 1e-9 leaves a margin of 300x over that.
- A statistic of the draws (a mean, sd or quantile of the prior or posterior, an HDI's ends, a probability,
  Pareto k-hat, a sweep's points, log-space moments and correlations, Sobol and Shapley effects): within
  K_MCSE of its own Monte Carlo standard error, the summary's stored MCSE where it has one, else the
  textbook one from the stored spread and draw count (`_statistic_mcse`). The draws are float32 and not the
  same bits on every build: XLA's transcendental functions differ in the last bit between releases and ISA
  paths, and importance weights and float32 sums amplify it. Measured between jaxlib 0.12.0.1 and 0.12.1
  on the same CPU: up to 0.1 MCSE (a posterior quantile of MFU x goodput), 0.08 MCSE for a posterior sd, 1e-7
  relative for most numbers. K_MCSE = 0.5 leaves 5x over that. A changed stream (another seed, a changed
  formula or key) moves each estimate by about sqrt(2) MCSE, inside 0.5 MCSE with probability 0.28, and a
  summary has hundreds of such numbers: test_another_seed_fails_the_comparison checks that it is caught.
- The ESS: to half a draw (it counts draws; float32 weights move it by 1e-7 relative, 0.01 draws).
- A standard error (an MCSE, a Sobol or Shapley index's se): to RTOL_SE. A standard error is quoted to two
  digits; float32 summation order moves it by up to 0.4% (measured); its own Monte Carlo error is larger
  still (1/sqrt(2n) = 0.3% at n = 65,536, more with the fourth moments it depends on). The Shapley se of an
  input carrying nearly all the variance is taken from its complement (mcflops.analysis.shapley), which has
  no cancellation to amplify the float32 rounding.

A build of JAX that changes the random bits themselves (a new PRNG implementation) fails here by design: the
message names both builds; regenerate with tests/golden/make.py and say so in the commit."""

from __future__ import annotations

import json
import math
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from scipy import stats

from tests.golden.make import summary

GOLDEN = Path(__file__).resolve().parent / "golden"
ROOT = GOLDEN.parents[1]
VOLATILE = {"timings", "seconds", "version", "versions", "device"}  # how long it took, which build and machine made it
RTOL_HOST = 1e-9
K_MCSE = 0.5
RTOL_SE = 2e-2
HALF_DRAW = 0.5
_NORMAL = NormalDist()
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


def _quantile_mcse(value: float, log_sd: float, p: float, n: float) -> float:
    """MCSE of the p-quantile of a quantity whose log is about normal with sd ``log_sd``, from n draws:
    sqrt(p (1 - p) / n) / f(q_p) (the sample quantile's asymptotic sd; Serfling 1980, Sec. 2.3.3), with the
    lognormal density f(q_p) = phi(z_p) / (q_p log_sd)."""
    return abs(value) * log_sd * math.sqrt(p * (1 - p) / n) / _NORMAL.pdf(_NORMAL.inv_cdf(p))


def _log_spread(p5: float, p95: float) -> float:
    """The log-scale sd of a quantity from its 5% and 95% points, as if its log were normal."""
    return math.log(p95 / p5) / (2 * _NORMAL.inv_cdf(0.95))


def _waterfall_mcse(doc: dict, path: tuple, want: float) -> float | None:
    """A layout waterfall's quantile (a factor's or a level's, prior or posterior: the posterior reweights the
    prior's draws, at most the engine's ESS of them), or a step's level (the product of the factors' medians up
    to it, as uncertain as the level of that name's median; the peak above the first step is a constant)."""
    wf = doc["layout"]["waterfall"]
    n_of = {"prior": float(doc["samples"]), "posterior": float(doc.get("posterior", {}).get("ess", doc["samples"]))}

    def mcse(entry: dict, which: str, value: float, p: float) -> float:
        return _quantile_mcse(value, _log_spread(entry["p5"], entry["p95"]), p, n_of[which])

    if path[2] in ("levels", "factors") and len(path) == 6:
        return mcse(_at(doc, path[:5]), path[4], want, int(str(path[5])[1:]) / 100)
    if path[2] == "steps" and len(path) == 5 and path[4] in ("before", "after"):
        i = path[3] if path[4] == "after" else path[3] - 1
        if i < 0:
            return None  # the peak
        which = "posterior" if "posterior" in doc else "prior"
        level = wf["levels"].get(wf["steps"][i]["label"])
        if level is not None:
            return mcse(level[which], which, want, 0.5)
        # a step after the levels (goodput): as uncertain, relatively, as the most uncertain level
        return abs(want) * max(mcse(v[which], which, 1.0, 0.5) for v in wf["levels"].values())
    return None


def _statistic_mcse(doc: dict, path: tuple, want: float) -> float | None:
    """The Monte Carlo standard error of the statistic of the draws at ``path``, or None for a value the
    draws do not enter (the module's docstring says which is which)."""
    leaf, parent = path[-1], path[:-1]
    if path[0] in ("posterior", "prior") and len(path) >= 2:
        if leaf in ("ess", "ess_fraction"):
            return None  # a count of draws: compared to half a draw, below
        if leaf == "pareto_k":
            s = float(doc["samples"])
            return 1 / math.sqrt(min(0.2 * s, 3 * math.sqrt(s)))  # k-hat's sd over its M tail draws
        q = _at(doc, parent)
        n = _draws(doc, path)
        if leaf == "posterior_probability":
            return math.sqrt(want * (1 - want) / n)
        if not isinstance(q, dict) or "sd" not in q and "log_sd" not in q:
            return None
        if leaf == "mean":
            return q.get("mcse_mean", q.get("sd", 0.0) / math.sqrt(n))
        if leaf == "sd":
            return q.get("mcse_sd", want / math.sqrt(2 * n))
        if leaf == "hdi90" or str(leaf).startswith("p") and str(leaf)[1:].isdigit():
            ps = (0.05, 0.95) if leaf == "hdi90" else (int(str(leaf)[1:]) / 100,)
            stored = [q.get(f"mcse_p{round(100 * p)}") for p in ps]
            if all(x is not None for x in stored):
                return max(stored)
            if "log_sd" in q:
                return max(_quantile_mcse(want, q["log_sd"], p, n) for p in ps)
            return q.get("sd", 0.0) * max(math.sqrt(p * (1 - p) / n) / _NORMAL.pdf(_NORMAL.inv_cdf(p)) for p in ps)
        return None
    if path[:2] == ("sensitivity", "sweeps") and len(path) == 4:
        sw = _at(doc, path[:3])
        i = sw[leaf].index(want) if want in sw[leaf] else None
        if i is None:
            return None
        log_sd = _log_spread(sw["p5"][i], sw["p95"][i])
        n = float(sw["samples"])
        if leaf == "mean":
            return abs(want) * log_sd / math.sqrt(n)
        if leaf == "p50_vs_first":  # a ratio of two medians: their relative errors add in quadrature
            return abs(want) * math.sqrt(2) * _quantile_mcse(1.0, log_sd, 0.5, n)
        if str(leaf).startswith("p") and str(leaf)[1:].isdigit():
            return _quantile_mcse(want, log_sd, int(str(leaf)[1:]) / 100, n)
        return None
    if path[0] == "observed" and leaf in ("prior_percentile", "prior_probability_inside"):
        scale = 100.0 if leaf == "prior_percentile" else 1.0  # a share of the prior's draws: binomial
        p = want / scale
        return scale * math.sqrt(p * (1 - p) / float(doc["samples"]))
    if path[:2] == ("layout", "waterfall") and path[2] in ("levels", "factors", "steps"):
        return _waterfall_mcse(doc, path, want)
    if path[:2] == ("sensitivity", "sobol_info") and leaf in ("sum_first", "sum_first_linear"):
        block = doc["sensitivity"]["sobol" if leaf == "sum_first" else "sobol_linear"]
        return math.sqrt(sum(v["first_se"] ** 2 for v in block.values()))  # the sum's se, the indices taken apart
    return None


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
    if path[0] == "posterior" and leaf in ("ess", "ess_fraction"):
        return max(host, HALF_DRAW / (1.0 if leaf == "ess" else float(doc["samples"])))
    mcse = _statistic_mcse(doc, path, want)
    return host if mcse is None else max(host, K_MCSE * mcse)


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
    fresh = json.loads(json.dumps(summary(Path("priors") / f"{name}.yaml")))
    stored = json.loads((GOLDEN / f"{name}.json").read_text())
    got, want = _strip(fresh), _strip(stored)
    # importance sampling throughout: a NUTS chain is chaotic in its last bits, so a stored NUTS posterior
    # could only be compared within its MCSE (as tests/calibration/test_shipped_fit.py does)
    assert (want.get("posterior") or {}).get("method", "importance") == "importance"
    diffs = _diff(got, want, want)
    builds = {k: (stored.get("versions", {}).get(k), fresh.get("versions", {}).get(k)) for k in ("jaxlib", "numpy")}
    said = ", ".join(f"{k} {a} stored, {b} here" for k, (a, b) in builds.items())
    assert not diffs, f"{said}\n" + "\n".join(sorted(diffs)[:20])


def test_the_tolerances_are_the_stated_multiples():
    """The classes above on a stored summary: a statistic's tolerance is K_MCSE of its MCSE (the stored one, or
    the lognormal quantile's, checked against SciPy's density), a host value's a billionth of it."""
    doc = json.loads((GOLDEN / "llama405b.json").read_text())
    post, prior = doc["posterior"]["mfu"], doc["prior"]["gpu_hours"]
    assert tolerance(doc, ("posterior", "mfu", "mean"), post["mean"]) == pytest.approx(K_MCSE * post["mcse_mean"])
    assert tolerance(doc, ("posterior", "mfu", "p95"), post["p95"]) == pytest.approx(K_MCSE * post["mcse_p95"])
    assert tolerance(doc, ("posterior", "mfu", "hdi90"), post["hdi90"][0]) == pytest.approx(
        K_MCSE * max(post["mcse_p5"], post["mcse_p95"]))
    dist = stats.lognorm(s=prior["log_sd"], scale=math.exp(prior["log_mean"]))
    n, q = doc["samples"], dist.ppf(0.25)  # a lognormal's quantile: the density there is the formula's
    assert tolerance(doc, ("prior", "gpu_hours", "p25"), q) == pytest.approx(
        K_MCSE * math.sqrt(0.25 * 0.75 / n) / dist.pdf(q), rel=1e-9)
    sob = doc["sensitivity"]["sobol"]["mfu"]
    assert tolerance(doc, ("sensitivity", "sobol", "mfu", "first"), sob["first"]) == pytest.approx(K_MCSE * sob["first_se"])
    arch = doc["architecture"]["flops_per_token"]
    assert tolerance(doc, ("architecture", "flops_per_token"), arch) == pytest.approx(1e-9 * arch)
    assert _diff({"x": {"log_sd": 0.1 + 1e-3}}, {"x": {"log_sd": 0.1}}, {"samples": 100_000, "x": {}})
    assert not _diff({"x": {"log_sd": 0.1 + 1e-5}}, {"x": {"log_sd": 0.1}}, {"samples": 100_000, "x": {}})


def test_another_seed_fails_the_comparison(monkeypatch):
    """A changed stream (here another seed) moves each statistic of the draws by about sqrt(2) of its MCSE
    (|N(0, 2)| has median 0.95) and nothing else: the comparison flags most statistics, the MCSEs it uses are
    of the right size (the median ratio within a factor of 2 of 0.95), and no value classed as the host's moves."""
    monkeypatch.chdir(ROOT)
    want = _strip(json.loads((GOLDEN / "llama405b.json").read_text()))
    got = _strip(json.loads(json.dumps(summary(Path("priors") / "llama405b.yaml", seed=12345))))
    ratios, host_moved = [], []

    def walk(g, w, where=()):
        if isinstance(g, dict):
            for k in set(g) & set(w):
                walk(g[k], w[k], where + (k,))
        elif isinstance(g, list):
            for i, (x, y) in enumerate(zip(g, w)):
                walk(x, y, where if _number(y) else where + (i,))
        elif isinstance(w, float) and _number(g) and not math.isnan(w):
            mcse = _statistic_mcse(want, where, w)
            if mcse:
                ratios.append(abs(g - w) / mcse)
            elif tolerance(want, where, w) == RTOL_HOST * abs(w) and abs(g - w) > RTOL_HOST * abs(w):
                host_moved.append(".".join(map(str, where)))

    walk(got, want)
    assert len(ratios) > 200 and not host_moved, host_moved
    assert np.mean(np.array(ratios) > K_MCSE) > 0.5
    assert 0.95 / 2 < np.median(ratios) < 0.95 * 2
    assert len(_diff(got, want, want)) > 100


def test_every_prior_file_has_a_stored_summary():
    assert sorted(p.stem for p in (ROOT / "priors").glob("*.yaml")) == sorted(p.stem for p in GOLDEN.glob("*.json"))
