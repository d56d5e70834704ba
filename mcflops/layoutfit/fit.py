"""The layout MFU model's efficiency priors, fitted to the layout-resolved benchmark rows (NumPyro, hierarchical).

Each row of ``mcflops/data/layout_runs.yaml`` becomes its step's deterministic terms (:func:`mcflops.layout.terms`:
the architecture's shape and counts, the accelerator's peak and bandwidths, the layout) and its measured MFU in
TRUE model FLOPs (the architecture's causal count, ``counts.training_flops_per_token``), converted from the
source's convention by the ratio of FLOPs per token (:func:`to_true`, each convention's count from
:func:`mcflops.chain.published_per_token`). The model, per row i of accelerator
family f and software stack k (every effect partially pooled; non-centred but the residual scales):

    logit eta_i = mu_gemm + tau_family z_f + tau_stack z_k + tau_series z_j    (GEMM efficiency of large GEMMs)
    log x_tp,i  = mu_tp + tau_tp z'_k,   log x_dp,i = mu_dp + tau_dp z''_k,   log cv = mu_cv
    MFU_i       = 1 / (tc (1 + beta) + X(x_tp, x_dp, tc)) / (1 + cv S),   tc = rho (K / (eta g) + lambda E) / busy
    log lambda  = mu_ew           (the memory-bound operations' multiplier on E, mcflops.layout.compute.elementwise_share)
    K           = 1 - A + A g / a_k   (the attention core, share A, at a fraction a_k of the GEMMs' efficiency:
                                     layout.compute.attention_slowdown; a_k of a stack on a family, fitted only
                                     where a model ran at several sequence lengths, mix.contrast_groups)
    X           = sum over classes of x C / T0, or its exposed part past the overlap window w tc
                  (:func:`mcflops.layout.communication_time`; the row's overlap flags say which)
    log sigma_k ~ Normal(log sigma_obs, tau_sigma)                      (each stack's residual scale, centred)
    log y_i     ~ sum_c (1/2^u_i) Student-t(4, log MFU_ic, s_k w_i),   s_k = sqrt(sigma_k^2 + FLOOR^2)
                  (w_i = 1.5 where a layout field was imputed; c over the 2^u_i settings of the u_i overlap flags
                  the row's source leaves out)

A series j (one table of one source: a model family on one cluster and build, inside its stack k) has its own
term: a new table of a known stack differs from the stack's other tables by more than the rows of one table
differ from each other (benchmarks/RESULTS.md, "series out, stack kept", before the term), and a pilot measures
exactly that term of its production run. A new run is a new series, whether its file names a fitted stack or not
(:func:`mcflops.layoutfit.predictive.predictive` draws the term afresh).

Stacks differ in how well the terms describe them (benchmarks/RESULTS.md: llm-foundry's scale is several times the
Megatron and MegaScale stacks'), so each has its own: a file that states a fitted stack gets that stack's effects
and residual (:func:`mcflops.layoutfit.predictive.predictive` with ``stack``), a new stack draws both.

(:mod:`mcflops.layout.model` for each term.) ``ep_comm`` does not enter: no benchmark row is a mixture of
experts, so its starting prior ships unchanged. FP8 rows are their own family (utilisation of the FP8 peak is a
different quantity); no TPU row is a benchmark, so a TPU gets the population draw.

Fields the sources leave out take the value :func:`layout_of` states (and raise the row's noise):
micro-batch 1, each recompute whose activations fit (none, selective, full: :func:`mcflops.layout.memory`), mixed
with equal weight like an unknown flag (:func:`recompute_modes`; the least of them in :attr:`Row.terms`), 1F1B (interleaved with 2 virtual stages where only "interleaved" is said),
ZeRO 3 under FSDP else 1, sequence parallelism on, an unknown MLP width 4 d_model, heads d_model / 128,
vocabulary 51,200 (Megatron's GPT default), sequence 8,192 (torchtitan's Llama 3 configs); Megatron-Core's
strong-scaling rows print no layout and take the weak-scaling 177B row's (tp 8, pp 6). An unstated overlap flag
is unknown, not imputed: the row's likelihood, and every prediction of it (:func:`row_draws`), is the equal-weight
mixture over its settings, as a prior file's and the held-out validation's are (:mod:`mcflops.layoutfit.mix`;
the two data-parallel flags on under FSDP, by its design).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from mcflops.hostrng import generator
from mcflops import hardware as catalogue
from mcflops.arch import Shape, counts as arch_counts
from mcflops.chain import published_per_token
from mcflops.layout import RECOMPUTE, Layout, Terms, memory, overlap_defaults, recompute_ratio, terms
from mcflops.layoutfit.data import LayoutRun, benchmark_rows
from mcflops.layoutfit.mix import FLOOR, Data, attention_draws, attention_group, attention_logit_prior, \
    attention_scale, components, draw_components, mfu_model, mixture, row_attention, stack_scales, step_over_t0, unknown_flags

FAMILIES = {"hopper": ("h100-sxm", "h100-pcie", "h800", "h200"), "a100": ("a100",),
            "tpu": ("tpu-v3", "tpu-v4", "tpu-v5p")}
# a part whose memory differs from the catalogue entry's (a row's memory_gb) and whose HBM bandwidth does too: NVIDIA
# A100 Tensor Core GPU datasheet (2021), A100 40GB SXM 1,555 GB/s against the 80GB part's 2,039
PART_HBM = {("a100", 40.0): 1555.0}
# the elementwise multiplier's 90% prior: bytes moved per activation byte stored (about 5: written, read back, the
# gradient's read and write; unfused chains of kernels more)
STARTING_EW = (1.0, 30.0)
STARTING_EP = (0.2, 1.5)  # ep_comm's starting prior (layout_fit.json before the fit), kept
# exposed communication's multipliers start near 1: overlap is in the terms now, so x is the time at the link's
# rate over the time taken (NCCL's bus bandwidth is 70-90% of the link's: x 1.1-1.4), below 1 for any overlap
# the flags do not state (NCCL's own pipelining, PyTorch DDP's bucketed all-reduce)
STARTING = {"gemm": (0.65, 0.1), "tp_comm": (0.2, 2.0), "dp_comm": (0.2, 2.0), "straggler_cv": (0.001, 0.02)}
Z95 = 1.6448536269514722
IMPUTED_NOISE = 1.5  # the noise of a row whose layout was partly imputed, relative to a fully stated one
DF = 4.0
TAU_SERIES_SCALE = 0.5  # half-normal scale of the series' spread (logit), as the stacks' GEMM effect's
ROW_SEED = 1  # a row's draws of a new family or stack: fixed, so its prediction is a function of the fit


def family(run: LayoutRun) -> str:
    """Accelerator family (H100/H800/H200 are one die), with FP8 rows apart."""
    fam = next(k for k, ids in FAMILIES.items() if run.accelerator in ids)
    return f"{fam}-fp8" if run.precision == "fp8" else fam


def stack(run: LayoutRun) -> str:
    """The software stack behind a row: its series' source, MegaScale's two columns apart; MLPerf Training's rounds
    one stack (one code base's lineage, NVIDIA's Megatron-based implementation that the submitters run), each round
    a series of it."""
    s = run.series
    for prefix, name in (("megatron-lm-2021", "megatron-2021"), ("megatron-core-2024", "megatron-core-2024"),
                         ("llm-foundry", "llm-foundry"), ("torchtitan", "torchtitan"), ("vtrain", "vtrain"),
                         ("mlperf-", "mlperf-training")):
        if s.startswith(prefix):
            return name
    if s.startswith("megascale"):
        return "megascale" if s.endswith("-megascale") else "megatron-on-megascale"
    return s


def unit(run: LayoutRun) -> str:
    """The configurations of one model on one stack: a series' rows of one model, accelerator, precision and
    sequence length, differing only in layout and count. What a pilot shares with its production run (a prior
    file's pilot keeps the file's architecture, accelerator and precision, and varies only layout fields and
    count), so :mod:`mcflops.layoutfit.rowres` splits the residual by it."""
    return "|".join(str(x) for x in (run.series, run.model, run.accelerator, run.precision or "bf16",
                                     run.architecture.get("seq_len")))


@dataclass(frozen=True)
class Row:
    """One run, ready for the model: its terms and its measured MFU in true model FLOPs."""

    id: str
    series: str
    stack: str
    family: str
    kind: str
    terms: Terms  # the unknown overlap flags off (:attr:`mix`'s first)
    y: float  # measured MFU, true model FLOPs
    published: float | None  # the MFU as the source counts it
    convention: str  # the source's ("tokens_per_s" when derived from throughput)
    to_true: float  # F_true / F_convention per token (published x to_true = y)
    imputed: tuple[str, ...]
    noise: float
    unknown: tuple[str, ...] = ()  # overlap flags the source leaves out
    mix: tuple[Terms, ...] = ()  # the terms at each mode x setting of ``unknown`` (mix.settings), equal weight
    modes: tuple[str, ...] = ("none",)  # the recompute modes mixed (the stated one, or every one that fits)
    accelerator: str = ""  # catalogue id / precision as the peak is read (bf16 where unstated): the baseline's key
    unit: str = ""  # :func:`unit`: the rows that differ from this one only in layout and count


def shape_of(run: LayoutRun, overrides: Mapping[str, Any] | None = None) -> tuple[Shape, tuple[str, ...]]:
    a, imp = dict(run.architecture), []
    a.update(overrides or {})
    d = a["d_model"]
    fill = {"heads": max(1, d // 128), "vocab": 51200, "seq_len": 8192}
    for k, v in fill.items():
        if a.get(k) is None:
            a[k], _ = v, imp.append(f"architecture.{k}")
    if a.get("ffn") is None:
        imp.append("architecture.ffn")
    keys = ("layers", "d_model", "heads", "vocab", "seq_len", "kv_heads", "ffn", "glu", "experts", "experts_active")
    return Shape(**{k: a.get(k) for k in keys}), tuple(i for i in imp if i != "architecture.heads")


def layout_of(run: LayoutRun, shape: Shape, overrides: Mapping[str, Any] | None = None) -> tuple[Layout, tuple[str, ...]]:
    """The row's layout, the module docstring's values where the source is silent; and what was imputed."""
    lay, imp = dict(run.layout), []
    lay.update(overrides or {})
    if lay["tp"] is None or lay["pp"] is None or lay["dp"] is None:
        lay.update(tp=8, pp=6, dp=run.count // 48, cp=1)  # the Megatron-Core weak-scaling 177B row's split
        imp.append("tp/pp/dp")
    schedule = lay["schedule"] or ("interleaved" if (lay["vpp"] or 1) > 1 else "1f1b")
    vpp = lay["vpp"] or (2 if schedule == "interleaved" else 1)
    if lay["pp"] > 1 and (lay["schedule"] is None or lay["vpp"] is None and schedule == "interleaved"):
        imp.append("schedule")
    if lay["micro_batch"] is None and lay["pp"] > 1:
        imp.append("micro_batch")
    if lay["recompute"] is None:
        imp.append("recompute")
    zero = lay["zero"] if lay["zero"] is not None else (3 if lay["fsdp"] else 1)
    acc = catalogue.get(run.accelerator)
    bw = {k: getattr(acc, k) for k in ("nvlink_gb_s", "nvlink_domain", "network_gb_s", "hbm_gb_s")}
    bw["hbm_gb_s"] = PART_HBM.get((acc.id, run.memory_gb), bw["hbm_gb_s"])
    bw = {k: lay[k] if lay.get(k) is not None else v for k, v in bw.items()}
    flags = {k: v if lay.get(k) is None else bool(lay[k]) for k, v in overlap_defaults(bool(lay["fsdp"])).items()}
    out = Layout(tp=lay["tp"], pp=lay["pp"], dp=lay["dp"], cp=lay["cp"] or 1, ep=lay["ep"] or 1, vpp=vpp,
                 micro_batch=lay["micro_batch"] or 1, global_batch=lay["global_batch"],
                 recompute=lay["recompute"] or "none", schedule=schedule, zero=zero,
                 sequence_parallel=True if lay["sequence_parallel"] is None else bool(lay["sequence_parallel"]),
                 **flags,
                 **bw)
    if lay["recompute"] is None:  # the least recompute whose activations fit the accelerator's memory
        out = dataclasses.replace(out, recompute=fitting_modes(run, shape, out)[0])
    return out, tuple(imp)


def fitting_modes(run: LayoutRun, shape: Shape, lo: Layout) -> tuple[str, ...]:
    """The recompute modes whose activations fit the accelerator's memory with ``lo`` (none, selective, full in
    that order; full alone where none fits)."""
    cap = run.memory_gb or catalogue.get(run.accelerator).memory_gb
    fit = tuple(m for m in RECOMPUTE
                if memory(dataclasses.replace(lo, recompute=m), shape, arch_counts(shape), cap, float(run.count)).headroom >= 0)
    return fit or ("full",)


def recompute_modes(run: LayoutRun, shape: Shape, lo: Layout, overrides: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The row's recompute: the one its source (or ``overrides``) states, else every mode that fits, mixed with
    equal weight as an unknown overlap flag is (mix)."""
    if run.layout["recompute"] is not None or (overrides or {}).get("recompute") is not None:
        return (lo.recompute,)
    return fitting_modes(run, shape, lo)


def to_true(convention: str, shape: Shape, n: float, recompute: str) -> float:
    """Multiply a published MFU by this to get it in true model FLOPs (causal, counted from the shape): the
    architecture's count over the source's (an HFU figure's counts the recompute at the layout model's ratio)."""
    ratio = recompute_ratio(recompute, shape.seq_len, shape.d_model) if convention == "hfu" else 1.0
    return arch_counts(shape).training_flops_per_token / published_per_token(convention, shape, n, recompute, ratio)


def prepare(run: LayoutRun, arch: Mapping[str, Any] | None = None, layout: Mapping[str, Any] | None = None) -> Row:
    """A run's terms and true MFU (``arch``/``layout``: fields to override, e.g. a production row's)."""
    shape, imp_a = shape_of(run, arch)
    lo, imp_l = layout_of(run, shape, layout)
    c = arch_counts(shape)
    acc = catalogue.get(run.accelerator)
    peak = acc.peak(run.precision or "bf16")
    unknown = unknown_flags(run.layout, layout)
    modes = recompute_modes(run, shape, lo, layout)
    mix = tuple(t for mode in modes for t in components(lambda lay: terms(lay, shape, c, peak, float(run.count)),
                                                        dataclasses.replace(lo, recompute=mode), unknown))
    tm = mix[0]
    m = run.measured
    if len(modes) > 1 and m["mfu"] is not None and m["convention"] == "hfu":
        raise ValueError(f"{run.id}: an HFU figure needs its recompute stated (the conversion depends on it)")
    n = run.params["active"]
    if m["mfu"] is not None:
        conv, published = m["convention"], m["mfu"]
        ratio = to_true(conv, shape, n, lo.recompute)
        y = published * ratio
    else:  # throughput only: tokens/s/GPU x the architecture's FLOPs per token over the peak
        conv, published, ratio = "tokens_per_s", None, 1.0
        y = m["tokens_per_s_per_gpu"] * c.training_flops_per_token / peak
    imputed = imp_a + imp_l
    noise = IMPUTED_NOISE if imputed else 1.0
    if conv == "unstated":
        noise *= IMPUTED_NOISE
    return Row(run.id, run.series, stack(run), family(run), run.kind, tm, float(y), published, conv, float(ratio),
               imputed, noise, unknown, mix, modes, f"{run.accelerator}/{run.precision or 'bf16'}", unit(run))


def rows(runs: Sequence[LayoutRun] | None = None) -> list[Row]:
    return [prepare(r) for r in (benchmark_rows() if runs is None else runs)]


def _lognormal(lo: float, hi: float) -> tuple[float, float]:
    return 0.5 * (math.log(lo) + math.log(hi)), (math.log(hi) - math.log(lo)) / (2 * Z95)


def model(a: Mapping[str, Any], n_fam: int, n_stack: int, observe: bool = True, n_series: int = 0,
          elementwise: bool = False, attention: bool = False, n_att: int = 0) -> None:
    """The NumPyro model (the module docstring); hyperpriors centred on the starting priors. ``n_series`` 0: no
    series effect (the model before it); ``elementwise``, ``attention`` False: without that term; ``n_att`` the
    attention groups the rows measure (``a["att_k"]`` indexes them)."""
    import jax
    import numpyro
    import jax.numpy as jnp
    import numpyro.distributions as dist

    g0, gsd = STARTING["gemm"]
    mu_g = numpyro.sample("mu_gemm", dist.Normal(math.log(g0 / (1 - g0)), 4 * gsd / (g0 * (1 - g0))))
    tau_f = numpyro.sample("tau_family", dist.HalfNormal(0.5))
    z_f = numpyro.sample("z_family", dist.Normal(0.0, 1.0).expand([n_fam]))
    tau_sg = numpyro.sample("tau_stack_gemm", dist.HalfNormal(0.5))
    z_sg = numpyro.sample("z_stack_gemm", dist.Normal(0.0, 1.0).expand([n_stack]))
    hyper = {}
    for p in ("tp_comm", "dp_comm"):
        m0, s0 = _lognormal(*STARTING[p])
        hyper[p] = (numpyro.sample(f"mu_log_{p}", dist.Normal(m0, s0)),
                    numpyro.sample(f"tau_stack_{p}", dist.HalfNormal(0.7)),
                    numpyro.sample(f"z_stack_{p}", dist.Normal(0.0, 1.0).expand([n_stack])))
    m0, s0 = _lognormal(*STARTING["straggler_cv"])
    log_cv = numpyro.sample("mu_log_straggler_cv", dist.Normal(m0, s0))
    sigma = numpyro.sample("sigma_obs", dist.HalfNormal(0.2))
    # each stack's residual scale about sigma_obs (stacks differ in how well the terms describe them: a new
    # stack draws its own). Centred, unlike the other stack effects: a stack of a hundred rows or more pins its
    # scale, and non-centred that pins a curved ridge of (sigma_obs, tau_sigma, z) that NUTS walks slowly
    # (Betancourt & Girolami 2015 on when each parameterisation suits). Non-centred, the held-out refits ended
    # at R-hat 1.8-3.4; centred with the floor (FLOOR) at the fit's tree depth, 1.02-1.08
    tau_sig = numpyro.sample("tau_sigma", dist.HalfNormal(0.5))
    log_sig = numpyro.sample("log_sigma_stack", dist.Normal(jnp.log(sigma), tau_sig).expand([n_stack]))
    fam, st = a["fam"], a["stack"]
    logit_eta = mu_g + tau_f * z_f[fam] + tau_sg * z_sg[st]
    if n_series:  # each series' own GEMM efficiency inside its stack (the module docstring), non-centred
        tau_se = numpyro.sample("tau_series", dist.HalfNormal(TAU_SERIES_SCALE))
        z_se = numpyro.sample("z_series", dist.Normal(0.0, 1.0).expand([n_series]))
        logit_eta = logit_eta + tau_se * z_se[a["series"]]
    log_tp = hyper["tp_comm"][0] + hyper["tp_comm"][1] * hyper["tp_comm"][2][st]
    log_dp = hyper["dp_comm"][0] + hyper["dp_comm"][1] * hyper["dp_comm"][2][st]
    log_ew = numpyro.sample("mu_log_elementwise", dist.Normal(*_lognormal(*STARTING_EW))) if elementwise else None
    att = None  # the attention core's efficiency relative to the GEMMs' (mix.row_attention)
    if attention:
        # each measured group's own, from the kernels' prior (mix.STARTING_ATT); every other row at the prior's median
        mu0, sd0 = attention_logit_prior()
        la = numpyro.sample("logit_attention", dist.Normal(mu0, sd0).expand([n_att])) if n_att else None
        att = row_attention(jnp, la, a["att_k"], a["att_scale"])[:, None]  # rows x 1, against rows x components
    m = mfu_model(a, logit_eta, log_tp, log_dp, log_cv, log_ew, att)  # rows x components: mix
    scale = jnp.sqrt(jnp.exp(2 * log_sig[st]) + FLOOR ** 2) * a["noise"]
    obs = mixture(jnp.log(m), scale, a["weight"], DF)
    if "fit" in a:  # rows held out of this fit add nothing to its likelihood (mcflops.layoutfit.holdout)
        obs = obs.mask(a["fit"] > 0)
    numpyro.sample("obs", obs, obs=a["log_y"] if observe else None)


@dataclass(frozen=True)
class Fit:
    data: Data
    samples: Mapping[str, np.ndarray]  # (chains x draws, ...) flattened
    r_hat_max: float
    ess_min: float
    divergences: int
    seconds: float
    chains: int
    draws: int
    summary: Mapping[str, Mapping[str, float]]
    attention: bool = False  # the model has the attention core's term (its groups: data.attention_groups)


def fit(rs: Sequence[Row], seed: int = 0, chains: int = 4, warmup: int = 500, draws: int = 500,
        families: Sequence[str] | None = None, stacks: Sequence[str] | None = None, max_tree_depth: int = 10,
        chain_method: str = "vectorized", held: Collection[str] = (), series: bool = True,
        elementwise: bool = True, attention: bool = False) -> Fit:
    """NUTS on the rows (fixed key ``seed``), chains run vectorised; R-hat and ESS of every parameter. Rows whose
    id is in ``held`` are in the arrays but not in the likelihood: the fit sees only the others. ``series``,
    ``elementwise`` False: without the series term, the memory-bound multiplier (the model before them). ``attention``
    True adds the attention core's term (off in the shipped fit: the production rows read worse with it,
    benchmarks/RESULTS.md, "The attention core's term"), fitted only where a model ran at several sequence lengths
    (mix.contrast_groups) and held at the kernels' prior median elsewhere."""
    import jax
    import jax.numpy as jnp
    from numpyro.diagnostics import summary
    from numpyro.infer import MCMC, NUTS, init_to_median

    t = time.perf_counter()
    d = Data.of(rs, families, stacks, held)
    a = {k: jnp.asarray(v) for k, v in d.arrays.items()}
    kernel = NUTS(model, target_accept_prob=0.9, init_strategy=init_to_median, max_tree_depth=max_tree_depth)
    mc = MCMC(kernel, num_warmup=warmup, num_samples=draws, num_chains=chains, chain_method=chain_method,
              progress_bar=False)
    mc.run(jax.random.PRNGKey(seed), a, len(d.families), len(d.stacks), True, len(d.series) if series else 0,
           elementwise, attention, len(d.attention_groups), extra_fields=("diverging",))
    grouped = {k: np.asarray(v) for k, v in mc.get_samples(group_by_chain=True).items()}
    summ = summary(grouped, group_by_chain=True)
    rh = [float(np.max(s["r_hat"])) for s in summ.values()]
    ess = [float(np.min(s["n_eff"])) for s in summ.values()]
    flat = {k: v.reshape((-1, *v.shape[2:])) for k, v in grouped.items()}
    table = {k: {"mean": float(np.mean(s["mean"])), "r_hat": float(np.max(s["r_hat"])), "ess": float(np.min(s["n_eff"]))}
             for k, s in summ.items()}
    return Fit(d, flat, max(rh), min(ess), int(np.sum(mc.get_extra_fields()["diverging"])),
               time.perf_counter() - t, chains, draws, table, attention)


def series_effect(f: Fit, series: str | None, rng) -> np.ndarray:
    """Per posterior draw, a series' term in logit GEMM efficiency: its own where the fit has it, a new series'
    (drawn from ``rng``) else; zeros, drawing nothing, for a fit without the series effect."""
    s = f.samples
    if "tau_series" not in s:
        return np.zeros(len(s["mu_gemm"]))
    known = series in f.data.series and "z_series" in s
    z = s["z_series"][:, f.data.series.index(series)] if known else rng.standard_normal(len(s["mu_gemm"]))
    return s["tau_series"] * z


def row_draws(f: Fit, r: Row) -> np.ndarray:
    """Posterior draws of a row's model MFU (true FLOPs), its family and stack as fitted (new ones drawn), its
    unknown overlap flags drawn per draw as the fit mixes them (mix.draw_components)."""
    s, rng = f.samples, generator(ROW_SEED)
    n = len(s["mu_gemm"])
    fz = s["z_family"][:, f.data.families.index(r.family)] if r.family in f.data.families else rng.standard_normal(n)
    k = f.data.stacks.index(r.stack) if r.stack in f.data.stacks else None
    z = {p: s[f"z_stack_{p}"][:, k] if k is not None else rng.standard_normal(n) for p in ("gemm", "tp_comm", "dp_comm")}
    logit = s["mu_gemm"] + s["tau_family"] * fz + s["tau_stack_gemm"] * z["gemm"] + series_effect(f, r.series, rng)
    eta = 1 / (1 + np.exp(-logit))
    x_tp = np.exp(s["mu_log_tp_comm"] + s["tau_stack_tp_comm"] * z["tp_comm"])
    x_dp = np.exp(s["mu_log_dp_comm"] + s["tau_stack_dp_comm"] * z["dp_comm"])
    a = Data.of([r]).arrays
    strag = 1 + np.exp(s["mu_log_straggler_cv"]) * r.terms.straggler_scale
    lam = np.exp(s["mu_log_elementwise"]) if "mu_log_elementwise" in s else 0.0
    # the row's group's fitted kernels, else the prior's draw (a new stack's, or a stack whose rows cannot tell):
    # after the draws above, so that a fit without the term draws them as before
    att = attention_draws(s, f.data.attention_groups, attention_group(r.stack, r.family), attention_scale(r.family),
                          rng) if f.attention else None
    per = [1 / step_over_t0(np, {k: v[0, c] if v.ndim == 2 else v[0] for k, v in a.items()}, eta, x_tp, x_dp, lam, att)
           / strag
           for c in range(len(r.mix))]
    return draw_components(per, r.unknown, len(r.modes))


def stack_sigma(f: Fit, stk: str | None, rng=None) -> np.ndarray:
    """Per posterior draw, the residual scale of stack ``stk`` as the likelihood reads it (with the floor): its own
    where the fit has it, a new stack's (drawn from the population, ``rng``) else; sigma_obs for a fit without
    per-stack scales."""
    s = f.samples
    fitted = stack_scales(s)
    if fitted is None:
        return np.asarray(s["sigma_obs"])
    if stk in f.data.stacks:
        return fitted[:, f.data.stacks.index(stk)]
    own = s["sigma_obs"] * np.exp(s["tau_sigma"] * (rng or generator(ROW_SEED)).standard_normal(len(s["sigma_obs"])))
    return np.hypot(own, FLOOR)  # the scale the likelihood reads (the model's floor in quadrature)
