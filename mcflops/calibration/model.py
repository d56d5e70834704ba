"""The model ``mcflops calibrate`` fits: effective utilization across published runs, hierarchical.

For run i with N_i (active) parameters, D_i tokens and an accelerator of dense 16-bit peak P_i, the
published accelerator-hours H_i imply an effective utilization u_i = MFU x goodput through
H_i = 6 N_i D_i / (P_i u_i 3600) (Kaplan et al. 2020 for 6ND; PaLM App. B for MFU). The model:

    logit u_i  = alpha + x_i . beta + a_org[org_i] + a_acc[family_i] + tau e_i,      e_i ~ N(0, 1)
    (e_i is integrated out in the likelihood by a second-order delta method; the predictive is exact)
    log H_i    ~ Normal(log(6 N_i D_i / (P_i 3600)) - log u_i - delta [kind_i = throughput], sigma[kind_i])
    upper_bound figures: P(log H_true <= log H_i) (a one-sided, censored likelihood)

- covariates x_i (mcflops/priors/calibrated.py), chosen by the grouped validation (calibration.select):
  MoE by default; log10(N / 1e10), log2(P / 312 TFLOP/s) and their product are candidates;
- a_org ~ N(0, tau_org), a_acc ~ N(0, tau_acc): partial pooling over organisations and accelerator
  families (H100 and H800 are one family); an unseen org or family is a new draw from the population;
- heavy tails (``Config.run_df``): the same location and scale under a Student-t likelihood, and a
  Student-t run effect in the predictive;
- drift (``Config.drift``): a random walk over publication years, a_year[y_k] = a_year[y_(k-1)] +
  tau_drift sqrt(y_k - y_(k-1)) z_k, z_k ~ N(0, 1), a_year[first year] = 0 (a local-level model, West &
  Harrison 1997, Bayesian Forecasting and Dynamic Models, ch. 2): a year the fit has no run from keeps its
  prior, the last fitted year's level plus tau_drift^2 per year of variance, so the predictive widens for a
  date past the data;
- sigma by ``hours_kind``: a model card's figure is tight, a third-party guess loose;
- ``throughput`` figures (throughput x tokens) exclude downtime, so they imply MFU alone: the offset
  delta = -log(goodput) >= 0 lowers their hours;
- without the noise per kind and the offset (``Config.kind_noise`` off) the run spread tau is the only
  noise and the likelihood is exact: logit(implied u_i) ~ Normal (or Student-t)(location_i, tau), an upper
  bound P(logit u >= logit implied u_i); the per-generation baseline's model, its generations pooled.

NUTS in NumPyro (imported inside the functions; the core layers never need it). Every parameter has a
leading fold axis with per-run likelihood weights, so one compiled sampler fits every leave-one-out
fold (predict.loo) as well as the full data.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from mcflops.calibration.runs import KINDS, Runs, load_runs

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
TAU_DRIFT_SCALE = 0.3  # half-normal scale of the drift per sqrt(year) (logit), as wide as the other spreads
THROUGHPUT_SCALE = 0.15  # half-normal: throughput figures miss ~0-25% downtime


@dataclass(frozen=True)
class Config:
    """Model structure (static) and sampler sizes."""

    # the grouped validation's choice among calibration.select's candidates (`mcflops calibrate --select`),
    # "generation, one noise, Student-t": size, peak and their product fitted the held-out organisations and
    # generations worse than the partially pooled effects alone, an organisation effect worse than none,
    # Student-t(4) run effects better than normal ones, and the noise per kind with the throughput offset
    # worse than the run spread alone (the offset, learnt from another organisation's throughput figures,
    # moved a held-out organisation's medians the wrong way); no MoE term, as in the per-generation baseline
    covariates: tuple[str, ...] = ()
    org_effect: bool = False
    acc_effect: bool = True
    # what the accelerator effect pools over: "family" (H100 and H800 one family) or the row's "generation"
    acc_group: str = "family"
    chains: int = 4
    warmup: int = 400
    draws: int = 400
    target_accept: float = 0.9
    run_df: float | None = 4.0  # Student-t run effects with these degrees of freedom (None: normal)
    # a noise per kind of published figure and the throughput offset; without them the run spread tau is
    # the only noise and logit(implied u) is exactly Normal / Student-t around its location: the
    # per-generation baseline's model with the generations partially pooled
    kind_noise: bool = False
    drift: bool = True  # the random walk over publication years (module docstring; the grouped validation's pick)


def _model_fn(cfg: Config, n_org: int, n_fam: int, n_folds: int, kinds_present: tuple[str, ...],
              year_gaps: tuple[float, ...] = ()):
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

    def model(x, org, fam, kind, c, y, w, yr=None):
        alpha = numpyro.sample("alpha", dist.Normal(ALPHA_MEAN, ALPHA_SD).expand([f]).to_event(1))
        beta = numpyro.sample("beta", dist.Normal(0.0, BETA_SD).expand([f, k]).to_event(2))
        tau = half("tau", TAU_SCALE)
        logit = alpha[:, None] + beta @ x.T  # (folds, runs)
        if cfg.drift and year_gaps:  # the random walk (module docstring), non-centred; the first year is 0
            tau_drift = half("tau_drift", TAU_DRIFT_SCALE)
            z_year = numpyro.sample("z_year", dist.Normal(0.0, 1.0).expand([f, len(year_gaps)]).to_event(2))
            steps = tau_drift[:, None] * jnp.sqrt(jnp.asarray(year_gaps, jnp.float32))[None, :] * z_year
            a_year = numpyro.deterministic("a_year", jnp.concatenate(
                [jnp.zeros((f, 1), jnp.float32), jnp.cumsum(steps, axis=1)], axis=1))
            logit = logit + a_year[:, yr]
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
        if not cfg.kind_noise:
            numpyro.deterministic("sigma", jnp.zeros((f, len(KINDS)), jnp.float32))
            lu = c - y  # log implied u: log(6ND / (P 3600)) - log H
            zz = jnp.broadcast_to((lu - jnp.log(-jnp.expm1(lu)))[None, :], logit.shape)  # logit of it
            s = jnp.broadcast_to(tau[:, None], logit.shape)
            bound = (kind == KINDS.index("upper_bound"))[None, :]
            # an upper bound on the hours is a lower bound on u: P(logit u >= z) = Phi((location - z) / tau)
            if cfg.run_df is None:
                ll = jnp.where(bound, norm.logcdf((logit - zz) / s), norm.logpdf(zz, logit, s))
            else:
                from jax.scipy.stats import t as student

                ll = jnp.where(bound, norm.logcdf((logit - zz) / s), student.logpdf(zz, cfg.run_df, logit, s))
            numpyro.factor("published_hours", jnp.sum(w * ll))
            return
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
        if cfg.run_df is None:
            ll = jnp.where((kind == KINDS.index("upper_bound"))[None, :], norm.logcdf((yy - mu) / s),
                           norm.logpdf(yy, mu, s))
        else:  # heavy-tailed run effects: the same location and scale under a Student-t (a censored
            # figure keeps the normal CDF: jax.scipy has no Student-t CDF, and a bound carries little weight)
            from jax.scipy.stats import t as student

            ll = jnp.where((kind == KINDS.index("upper_bound"))[None, :], norm.logcdf((yy - mu) / s),
                           student.logpdf(yy, cfg.run_df, mu, s))
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
        for name in ("alpha", "beta", "tau", "tau_org", "tau_acc", "tau_drift", "a_org", "a_acc", "a_year", "sigma",
                     "throughput_offset"):
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

    def thinned(self, most: int) -> dict[str, np.ndarray]:
        """Every site's draws, every k-th kept so that at most ``most`` remain."""
        return {k: thin(v, most) for k, v in self.draws.items()}

    def max_r_hat(self) -> float:
        return max((s["r_hat"] for s in self.summary().values() if np.isfinite(s["r_hat"])), default=float("nan"))


def _labels(fit: Fit, name: str, v: np.ndarray) -> list[str]:
    if v.ndim == 2:
        return [name]
    names = {"beta": fit.config.covariates, "a_org": fit.runs.org_names, "a_acc": fit.runs.acc_names(fit.config.acc_group),
             "a_year": fit.runs.year_names, "sigma": KINDS}[name]
    return [f"{name}[{n}]" for n in names]


class Sampler:
    """One compiled NUTS sampler for a model structure, data shape and fold count; refits reuse it."""

    def __init__(self, runs: Runs, cfg: Config, folds: int = 1):
        from numpyro.infer import MCMC, NUTS

        self.runs, self.cfg, self.folds = runs, cfg, folds
        years = runs.year_names if cfg.drift else ()
        model = _model_fn(cfg, len(runs.org_names), len(runs.acc_names(cfg.acc_group)), folds,
                          tuple(sorted(set(runs.kinds))), tuple(float(b - a) for a, b in zip(years, years[1:])))
        self.mcmc = MCMC(NUTS(model, target_accept_prob=cfg.target_accept), num_warmup=cfg.warmup,
                         num_samples=cfg.draws, num_chains=cfg.chains, chain_method="vectorized",
                         progress_bar=False, jit_model_args=True)
        ix = runs.index()
        self.args = (runs.x(cfg.covariates), ix["org"], runs.acc_index(cfg.acc_group), ix["kind"], runs.log_hours_u1, runs.log_hours)
        self.year = runs.year_index() if len(years) > 1 else None

    def fit(self, key, weights: np.ndarray | None = None) -> list[Fit]:
        """One joint run; ``weights`` is (folds, runs) (default: every run, every fold). One Fit per fold."""
        import jax.numpy as jnp

        w = np.ones((self.folds, self.runs.n)) if weights is None else np.asarray(weights, float)
        if w.shape != (self.folds, self.runs.n):
            raise ValueError(f"weights must have shape {(self.folds, self.runs.n)}, got {w.shape}")
        t0 = time.perf_counter()
        args = tuple(jnp.asarray(a, jnp.int32 if a.dtype.kind == "i" else jnp.float32) for a in self.args)
        extra = () if self.year is None else (jnp.asarray(self.year, jnp.int32),)
        self.mcmc.run(key, *args, jnp.asarray(w, jnp.float32), *extra, extra_fields=("diverging", "num_steps"))
        grouped = {k: np.asarray(v, np.float64) for k, v in self.mcmc.get_samples(group_by_chain=True).items()}
        div = int(np.asarray(self.mcmc.get_extra_fields()["diverging"]).sum())
        secs = time.perf_counter() - t0
        fits = []
        for i in range(self.folds):
            by_chain = {k: v[:, :, i] for k, v in grouped.items() if not k.startswith("z_")}
            draws = {k: v.reshape((v.shape[0] * v.shape[1],) + v.shape[2:]) for k, v in by_chain.items()}
            fits.append(Fit(self.cfg, self.runs, w[i], draws, by_chain, div, secs))
        return fits


def fit(key, runs: Runs | None = None, cfg: Config = Config(), weights: np.ndarray | None = None) -> Fit:
    """Fit the model by NUTS (``key``: a JAX PRNG key) to every run (or with per-run ``weights``)."""
    runs = runs or load_runs()
    return Sampler(runs, cfg).fit(key, None if weights is None else np.asarray(weights, float)[None, :])[0]


def describe_structure(cfg: Mapping[str, Any]) -> tuple[str, str]:
    """A structure in words, from a Config's fields as data (calibration.json's ``config``): its terms besides
    the intercept and covariates, and what a run the data have not seen gets."""
    acc = "accelerator-family" if cfg.get("acc_group", "family") == "family" else "accelerator-generation"
    effects = [e for e, on in (("organisation", cfg.get("org_effect", True)), (acc, cfg.get("acc_effect", True))) if on]
    terms = [f"partially pooled {' and '.join(effects)} effects" if effects else "no group effects"]
    if not cfg.get("org_effect", True):
        terms.append("no organisation effect")
    terms.append(("Student-t" if cfg.get("run_df") else "normal") + " run effects")
    terms.append("a noise per kind of published figure and a throughput offset" if cfg.get("kind_noise", True)
                 else "no noise per kind of figure (the run spread is the only noise)")
    unseen = [f"an {w} with no published run gets the population spread of {ws}" for w, ws, on in
              (("organisation", "organisations", cfg.get("org_effect", True)),
               ("accelerator family", "accelerator families", cfg.get("acc_effect", True))) if on]
    if not cfg.get("org_effect", True):
        unseen.append("an organisation given does not move the prior")
    return ", ".join(terms), "; ".join(unseen)


def thin(v: np.ndarray, most: int) -> np.ndarray:
    """Every k-th row of ``v``, k the smallest step that keeps at most ``most``."""
    step = max(1, math.ceil(v.shape[0] / most))
    return v[::step]
