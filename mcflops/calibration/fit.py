"""``mcflops calibrate``: a hierarchical Bayesian model of effective utilization across published runs.

For run i with N_i (active) parameters, D_i tokens and an accelerator of dense 16-bit peak P_i, the
published accelerator-hours H_i imply an effective utilization u_i = MFU x goodput through
H_i = 6 N_i D_i / (P_i u_i 3600) (Kaplan et al. 2020 for 6ND; PaLM App. B for MFU). The model:

    logit u_i  = alpha + x_i . beta + a_org[org_i] + a_acc[family_i] + tau e_i,      e_i ~ N(0, 1)
    (e_i is integrated out in the likelihood by a second-order delta method; the predictive is exact)
    log H_i    ~ Normal(log(6 N_i D_i / (P_i 3600)) - log u_i - delta [kind_i = throughput], sigma[kind_i])
    upper_bound figures: P(log H_true <= log H_i) (a one-sided, censored likelihood)

- covariates x_i (mcflops/derived.py): log10(N / 1e10), log2(P / 312 TFLOP/s), their product (a small
  model leaves a fast chip idle more: Llama 3 8B on H100 is at 0.14), and MoE;
- a_org ~ N(0, tau_org), a_acc ~ N(0, tau_acc): partial pooling over organisations and accelerator
  families (H100 and H800 are one family); an unseen org or family is a new draw from the population;
- sigma by ``hours_kind``: a model card's figure is tight, a third-party guess loose;
- ``throughput`` figures (throughput x tokens) exclude downtime, so they imply MFU alone: the offset
  delta = -log(goodput) >= 0 lowers their hours.

NUTS in NumPyro (imported inside the functions; the core layers never need it). Leave-one-out refits
the model without each run (the held-out run's likelihood weight is 0, so every refit reuses one
compiled sampler) and predicts its published hours.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from mcflops.priors import calibrated as derived

KINDS = ("reported", "derived", "third_party", "reported_rounded", "reported_informal", "throughput",
         "upper_bound")
# Prior scale (half-normal, log hours) of each kind's noise: what a figure of that kind is worth.
SIGMA_REPORTED = 0.02  # fixed: a stated figure (3-4 significant digits); its scope questions are part of
# the run-to-run spread tau, from which a separate reporting noise cannot be told apart (the two trade
# off along a curved ridge that NUTS crosses badly)
SIGMA_SCALE = {"reported": SIGMA_REPORTED,
               "derived": 0.15,  # count x days: "including some downtime", stage mixes
               "third_party": 0.3,  # someone else's guess (OPT via LLaMA, GPT-3 via Patterson)
               "reported_rounded": 0.15, "reported_informal": 0.15,
               "throughput": 0.1,  # throughput x tokens: its downtime is the offset, not noise
               "upper_bound": 0.1}  # scale of the censored likelihood
ALPHA_MEAN, ALPHA_SD = math.log(0.35 / 0.65), 0.75  # logit u at 10B, A100, dense: the "30-40%" rule, widened
BETA_SD = 0.5  # per decade of N, per doubling of peak, per unit of their product, MoE vs dense
TAU_SCALE = TAU_ORG_SCALE = TAU_ACC_SCALE = 0.3  # half-normal scales of run, org and family spreads (logit)
THROUGHPUT_SCALE = 0.15  # half-normal: throughput figures miss ~0-25% downtime
PROBS = (0.05, 0.5, 0.95)


@dataclass(frozen=True)
class Runs:
    """Published runs as arrays for the model."""

    ids: tuple[str, ...]
    orgs: tuple[str, ...]
    accelerators: tuple[str, ...]
    kinds: tuple[str, ...]
    params: np.ndarray  # active parameters
    moe: np.ndarray  # 0/1
    log_hours: np.ndarray  # published accelerator-hours (log)
    log_hours_u1: np.ndarray  # log(6 N D / (P 3600)): the hours at u = 1

    @property
    def n(self) -> int:
        return len(self.ids)

    @property
    def org_names(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.orgs)))

    @property
    def family_names(self) -> tuple[str, ...]:
        return tuple(sorted({derived.accelerator_family(a) for a in self.accelerators}))

    def x(self, names: Sequence[str]) -> np.ndarray:
        peaks = np.array([derived.peak16(a) for a in self.accelerators])
        return derived.covariates(names, self.params, peaks, self.moe)

    def index(self) -> dict[str, np.ndarray]:
        orgs, fams = self.org_names, self.family_names
        return {"org": np.array([orgs.index(o) for o in self.orgs], np.int32),
                "fam": np.array([fams.index(derived.accelerator_family(a)) for a in self.accelerators], np.int32),
                "kind": np.array([KINDS.index(k) for k in self.kinds], np.int32)}

    @property
    def implied_u(self) -> np.ndarray:
        return np.exp(self.log_hours_u1 - self.log_hours)


def runs_from_records(records: Sequence[dict]) -> Runs:
    """Runs from mappings with id, org, moe, params_active, tokens, accelerator, hours, hours_kind."""
    for r in records:
        if r["hours_kind"] not in KINDS:
            raise ValueError(f"run {r['id']}: unknown hours_kind {r['hours_kind']!r} (expected one of {KINDS})")
    peak = np.array([derived.peak16(r["accelerator"]) for r in records])
    n = np.array([float(r["params_active"]) for r in records])
    d = np.array([float(r["tokens"]) for r in records])
    return Runs(ids=tuple(str(r["id"]) for r in records), orgs=tuple(str(r["org"]) for r in records),
                accelerators=tuple(str(r["accelerator"]) for r in records),
                kinds=tuple(str(r["hours_kind"]) for r in records), params=n,
                moe=np.array([float(bool(r.get("moe", False))) for r in records]),
                log_hours=np.log([float(r["hours"]) for r in records]),
                log_hours_u1=np.log(6.0 * n * d / (peak * 3600.0)))  # Kaplan et al. 2020: C = 6ND


def data_text() -> str:
    return importlib.resources.files("mcflops").joinpath("data", "published_runs.yaml").read_text("utf-8")


def load_runs() -> Runs:
    """The published runs shipped in mcflops/data/published_runs.yaml."""
    from ruamel.yaml import YAML

    return runs_from_records(YAML(typ="safe", pure=True).load(data_text())["runs"])


@dataclass(frozen=True)
class Config:
    """Model structure (static) and sampler sizes."""

    covariates: tuple[str, ...] = derived.COVARIATES
    org_effect: bool = True
    acc_effect: bool = True
    chains: int = 4
    warmup: int = 400
    draws: int = 400
    target_accept: float = 0.9


def _model_fn(cfg: Config, n_org: int, n_fam: int, n_folds: int, kinds_present: tuple[str, ...]):
    """The NumPyro model for one structure; data arrays are arguments (one compile per structure).

    Every parameter has a leading fold axis of size ``n_folds``: fold f weighs run i's likelihood by
    ``w[f, i]`` and shares nothing with the other folds, so the joint target is the product of the
    folds' posteriors and one NUTS run samples all of them (leave-one-out in one compiled run).
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax.nn import log_sigmoid
    from jax.scipy.stats import norm

    # a noise scale is sampled only for the kinds in the data (a prior-only scale is a long log-space
    # tail for NUTS to wander, and nothing uses it); reported is fixed; absent kinds keep their scale
    learn = [k for k in KINDS[1:] if k in kinds_present]
    scales = jnp.asarray([SIGMA_SCALE[k] for k in learn], jnp.float32)
    throughput = "throughput" in kinds_present
    f, k = n_folds, len(cfg.covariates)

    def half(name, scale):
        return numpyro.sample(name, dist.HalfNormal(scale).expand([f]).to_event(1))

    def model(x, org, fam, kind, c, y, w):
        alpha = numpyro.sample("alpha", dist.Normal(ALPHA_MEAN, ALPHA_SD).expand([f]).to_event(1))
        beta = numpyro.sample("beta", dist.Normal(0.0, BETA_SD).expand([f, k]).to_event(2))
        tau = half("tau", TAU_SCALE)
        logit = alpha[:, None] + beta @ x.T  # (folds, runs)
        if cfg.org_effect:
            tau_org = half("tau_org", TAU_ORG_SCALE)
            z_org = numpyro.sample("z_org", dist.Normal(0.0, 1.0).expand([f, n_org]).to_event(2))
            a_org = numpyro.deterministic("a_org", tau_org[:, None] * z_org)  # non-centred
            logit = logit + a_org[:, org]
        if cfg.acc_effect:
            tau_acc = half("tau_acc", TAU_ACC_SCALE)
            z_acc = numpyro.sample("z_acc", dist.Normal(0.0, 1.0).expand([f, n_fam]).to_event(2))
            a_acc = numpyro.deterministic("a_acc", tau_acc[:, None] * z_acc)
            logit = logit + a_acc[:, fam]
        if learn:
            sig = numpyro.sample("sigma_kind", dist.HalfNormal(jnp.broadcast_to(scales, (f, len(learn)))).to_event(2))
        sigma = numpyro.deterministic("sigma", jnp.stack(
            [sig[:, learn.index(n)] if n in learn else jnp.full((f,), SIGMA_SCALE[n], jnp.float32)
             for n in KINDS], axis=-1))
        offset = half("throughput_offset", THROUGHPUT_SCALE) if throughput else jnp.zeros((f,), jnp.float32)
        # The run effect tau e_i is integrated out: log sigmoid(m + tau e) has, to second order in tau
        # (Taylor expansion; d/dm log sigmoid(m) = 1 - u, d2/dm2 = -u (1 - u)), mean
        # log u - u (1 - u) tau^2 / 2 and variance (1 - u)^2 tau^2 + (u (1 - u))^2 tau^4 / 2.
        log_u = log_sigmoid(logit)
        u = jnp.exp(log_u)
        t2 = (tau * tau)[:, None]
        mean_log_u = log_u - 0.5 * u * (1.0 - u) * t2
        var_log_u = (1.0 - u) ** 2 * t2 + 0.5 * (u * (1.0 - u)) ** 2 * t2 * t2
        is_thr = (kind == KINDS.index("throughput")).astype(jnp.float32)
        mu = c[None, :] - mean_log_u - offset[:, None] * is_thr[None, :]
        s = jnp.sqrt(sigma[:, kind] ** 2 + var_log_u)
        yy = jnp.broadcast_to(y[None, :], mu.shape)
        ll = jnp.where((kind == KINDS.index("upper_bound"))[None, :], norm.logcdf((yy - mu) / s),
                       norm.logpdf(yy, mu, s))
        numpyro.factor("published_hours", jnp.sum(w * ll))

    return model


@dataclass
class Fit:
    """One fold's posterior draws (chains x draws flattened first) and diagnostics."""

    config: Config
    runs: Runs
    weights: np.ndarray
    draws: dict[str, np.ndarray]
    by_chain: dict[str, np.ndarray] = field(repr=False)
    divergences: int  # of the joint run (all folds share trajectories)
    seconds: float

    def summary(self) -> dict[str, dict[str, float]]:
        """Mean, sd, p5, p95, split R-hat and ESS of every scalar (vector sites are indexed)."""
        from numpyro.diagnostics import effective_sample_size, split_gelman_rubin

        out: dict[str, dict[str, float]] = {}
        for name in ("alpha", "beta", "tau", "tau_org", "tau_acc", "a_org", "a_acc", "sigma", "throughput_offset"):
            if name not in self.by_chain:
                continue
            v = self.by_chain[name]
            labels = _labels(self, name, v)
            flat = v.reshape(v.shape[:2] + (-1,))
            for j, label in enumerate(labels):
                x = flat[:, :, j]
                if np.ptp(x) == 0:  # fixed: the reported noise, kinds not in the data
                    continue
                out[label] = {"mean": float(x.mean()), "sd": float(x.std()), "p5": float(np.quantile(x, 0.05)),
                              "p95": float(np.quantile(x, 0.95)),
                              "r_hat": float(split_gelman_rubin(x)),  # split: also for one chain
                              "ess": float(effective_sample_size(x))}
        return out

    def max_r_hat(self) -> float:
        return max((s["r_hat"] for s in self.summary().values() if np.isfinite(s["r_hat"])), default=float("nan"))


def _labels(fit: Fit, name: str, v: np.ndarray) -> list[str]:
    if v.ndim == 2:
        return [name]
    names = {"beta": fit.config.covariates, "a_org": fit.runs.org_names, "a_acc": fit.runs.family_names,
             "sigma": KINDS}[name]
    return [f"{name}[{n}]" for n in names]


class Sampler:
    """One compiled NUTS sampler for a model structure, data shape and fold count; refits reuse it."""

    def __init__(self, runs: Runs, cfg: Config, folds: int = 1):
        from numpyro.infer import MCMC, NUTS

        self.runs, self.cfg, self.folds = runs, cfg, folds
        model = _model_fn(cfg, len(runs.org_names), len(runs.family_names), folds, tuple(sorted(set(runs.kinds))))
        self.mcmc = MCMC(NUTS(model, target_accept_prob=cfg.target_accept), num_warmup=cfg.warmup,
                         num_samples=cfg.draws, num_chains=cfg.chains, chain_method="vectorized",
                         progress_bar=False, jit_model_args=True)
        ix = runs.index()
        self.args = (runs.x(cfg.covariates), ix["org"], ix["fam"], ix["kind"], runs.log_hours_u1, runs.log_hours)

    def fit(self, key, weights: np.ndarray | None = None) -> list[Fit]:
        """One joint run; ``weights`` is (folds, runs) (default: every run, every fold). One Fit per fold."""
        import jax.numpy as jnp

        w = np.ones((self.folds, self.runs.n)) if weights is None else np.asarray(weights, float)
        if w.shape != (self.folds, self.runs.n):
            raise ValueError(f"weights must have shape {(self.folds, self.runs.n)}, got {w.shape}")
        t0 = time.perf_counter()
        args = tuple(jnp.asarray(a, jnp.int32 if a.dtype.kind == "i" else jnp.float32) for a in self.args)
        self.mcmc.run(key, *args, jnp.asarray(w, jnp.float32), extra_fields=("diverging", "num_steps"))
        grouped = {k: np.asarray(v, np.float64) for k, v in self.mcmc.get_samples(group_by_chain=True).items()}
        div = int(np.asarray(self.mcmc.get_extra_fields()["diverging"]).sum())
        secs = time.perf_counter() - t0
        fits = []
        for i in range(self.folds):
            by_chain = {k: v[:, :, i] for k, v in grouped.items() if not k.startswith("z_")}
            draws = {k: v.reshape((-1,) + v.shape[2:]) for k, v in by_chain.items()}
            fits.append(Fit(self.cfg, self.runs, w[i], draws, by_chain, div, secs))
        return fits


def fit(key, runs: Runs | None = None, cfg: Config = Config(), weights: np.ndarray | None = None) -> Fit:
    """Fit the model by NUTS (``key``: a JAX PRNG key) to every run (or with per-run ``weights``)."""
    runs = runs or load_runs()
    return Sampler(runs, cfg).fit(key, None if weights is None else np.asarray(weights, float)[None, :])[0]


def _thin(v: np.ndarray, most: int) -> np.ndarray:
    step = max(1, math.ceil(v.shape[0] / most))
    return v[::step]


def predict_log_u(fit: Fit, i: int, probs=PROBS, most: int = 1000) -> np.ndarray:
    """Quantiles of the log utilization run i's published figure would imply, from the fit's draws.

    Uses run i's own org and family effects: for a held-out run whose org is in no other run, that
    effect's posterior is its prior, i.e. a new org drawn from the population.
    """
    d = {k: _thin(v, most) for k, v in fit.draws.items()}
    runs, ix = fit.runs, fit.runs.index()
    x = runs.x(fit.config.covariates)[i]
    mean = d["alpha"] + d["beta"] @ x
    if "a_org" in d:
        mean = mean + d["a_org"][:, ix["org"][i]]
    if "a_acc" in d:
        mean = mean + d["a_acc"][:, ix["fam"][i]]
    kind = runs.kinds[i]
    shift = d["throughput_offset"] if kind == "throughput" else np.zeros_like(mean)
    sigma = d["sigma"][:, KINDS.index(kind)]
    return derived.log_u_quantiles(mean, d["tau"], shift, sigma, probs)


def predict_hours(fit: Fit, i: int, probs=PROBS) -> np.ndarray:
    """Quantiles of run i's published hours: H = 6ND / (P u 3600), so H's p-quantile uses u's (1 - p)."""
    q = predict_log_u(fit, i, 1.0 - np.asarray(probs, float))
    return np.exp(fit.runs.log_hours_u1[i] - q)


@dataclass
class LooRow:
    id: str
    kind: str
    published: float
    p5: float
    p50: float
    p95: float
    covered: bool
    abs_log_error: float  # |log(p50 / published)|
    width: float  # p95 / p5
    divergences: int  # of the joint run
    max_r_hat: float


@dataclass
class Loo:
    rows: list[LooRow]
    seconds: float
    fits: list[Fit] = field(default_factory=list, repr=False)  # each fold's posterior (not serialised)

    @property
    def coverage(self) -> float:
        return float(np.mean([r.covered for r in self.rows]))

    @property
    def median_abs_log_error(self) -> float:
        return float(np.nanmedian([r.abs_log_error for r in self.rows]))

    @property
    def median_width(self) -> float:
        return float(np.median([r.width for r in self.rows]))

    def metrics(self) -> dict[str, float]:
        return {"runs": len(self.rows), "coverage_90": self.coverage,
                "median_abs_log_error": self.median_abs_log_error,
                "median_error_pct": 100.0 * math.expm1(self.median_abs_log_error),
                "median_p95_over_p5": self.median_width, "seconds": self.seconds}

    def to_dict(self) -> dict[str, Any]:
        return {**self.metrics(), "rows": [r.__dict__ for r in self.rows]}


def loo(key, runs: Runs | None = None, cfg: Config = Config(), only: Sequence[int] | None = None) -> Loo:
    """Exact leave-one-out: refit without each run (its weight 0) and predict its published hours.

    All folds are sampled in one joint NUTS run (see :func:`_model_fn`), so LOO costs a few fits, not 20.
    """
    runs = runs or load_runs()
    which = list(range(runs.n)) if only is None else list(only)
    w = np.ones((len(which), runs.n))
    w[np.arange(len(which)), which] = 0.0
    t0 = time.perf_counter()
    fits = Sampler(runs, cfg, folds=len(which)).fit(key, w)
    rows = []
    for f, i in zip(fits, which):
        p5, p50, p95 = predict_hours(f, i)
        pub = float(np.exp(runs.log_hours[i]))
        bound = runs.kinds[i] == "upper_bound"  # the true hours are below the figure: only p5 can miss
        rows.append(LooRow(runs.ids[i], runs.kinds[i], pub, float(p5), float(p50), float(p95),
                           bool(pub >= p5) if bound else bool(p5 <= pub <= p95),
                           float("nan") if bound else abs(math.log(p50 / pub)), float(p95 / p5),
                           f.divergences, f.max_r_hat()))
    return Loo(rows, time.perf_counter() - t0, fits)


def fit_id(cfg: Config, seed: int) -> str:
    blob = json.dumps({"data": hashlib.sha256(data_text().encode()).hexdigest(), "config": cfg.__dict__,
                       "seed": seed}, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def export(fit: Fit, seed: int, loo_result: Loo | None = None, keep: int = 600) -> dict[str, Any]:
    """The fit as data for mcflops/data/calibration_fit.json: thinned posterior draws and diagnostics."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("mcflops")
    except PackageNotFoundError:
        ver = "0+unknown"
    names = ("alpha", "beta", "tau", "tau_org", "tau_acc", "a_org", "a_acc", "sigma", "throughput_offset")
    draws = {k: _round(_thin(fit.draws[k], keep)) for k in names if k in fit.draws}
    summ = fit.summary()
    out = {"schema": derived.FIT_SCHEMA, "fit_id": fit_id(fit.config, seed), "made_by": "mcflops calibrate --write",
           "mcflops_version": ver, "data_sha256": hashlib.sha256(data_text().encode()).hexdigest(), "seed": seed, "n_runs": int(fit.runs.n), "runs": list(fit.runs.ids),
           "covariates": list(fit.config.covariates), "orgs": list(fit.runs.org_names),
           "families": list(fit.runs.family_names), "kinds": list(KINDS),
           "config": {k: list(v) if isinstance(v, tuple) else v for k, v in fit.config.__dict__.items()},
           "diagnostics": {"divergences": fit.divergences,
                           "max_r_hat": max(s["r_hat"] for s in summ.values()),
                           "min_ess": min(s["ess"] for s in summ.values())},
           "draws": draws}
    if loo_result is not None:
        out["loo"] = loo_result.metrics()
    return out


def _round(v: np.ndarray) -> list:
    return np.vectorize(lambda x: float(f"{x:.5g}"))(v).tolist()


def population_table(fit: Fit) -> list[dict[str, Any]]:
    """The calibrated prior (p5/p50/p95 of u) for a new org's run at a few sizes on each family."""
    fitd = {"draws": {k: _thin(v, 1000) for k, v in fit.draws.items()}, "covariates": list(fit.config.covariates),
            "orgs": [], "families": list(fit.runs.family_names), "kinds": list(KINDS)}
    rows = []
    for acc in ("a100", "h100-sxm", "tpu-v4", "b200"):
        for n in (7e9, 70e9, 400e9):
            q = np.exp(derived.log_u_quantiles(*derived.predictive(fitd, n, acc, False), PROBS))
            rows.append({"accelerator": acc, "params": n, "p5": q[0], "p50": q[1], "p95": q[2]})
    return rows
