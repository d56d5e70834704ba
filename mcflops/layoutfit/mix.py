"""The layout fit's rows as arrays, with an axis over the settings a row's source leaves out: overlap flags and
the recompute mode.

An overlap flag (``overlap_grad_reduce``, ``overlap_param_gather``, ``tp_comm_overlap``) that a benchmark row's
source does not state is unknown, as it is in a prior file (:mod:`mcflops.spec.layoutspec`) and in the held-out
validation: each of its two settings is taken with weight 1/2, independently, so a row with u unknown flags is
the equal-weight mixture of its 2^u layouts (the 1/2 is a prior choice, no setting favoured, not a measurement).
Under FSDP the two data-parallel flags are on by its design (Zhao et al. 2023, "PyTorch FSDP", Sec. 3.3) and
not unknown. A recompute the source does not state is unknown the same way: each mode whose activations fit the
accelerator's memory (:func:`mcflops.layoutfit.fit.recompute_modes`) with equal weight, so a row has
modes x 2^u components, each with its own terms (:func:`mcflops.layout.terms`).

A row's likelihood is then the mixture of its components' (:data:`mcflops.layoutfit.fit.DF`-Student-t)
densities, log sum_c w_c p_c(y), computed as a log-sum-exp over an axis of configurations (shape rows x K, K the
most components of any row); a row with fewer components is padded with copies of its first at weight 0. A flag
that cannot act on a row (``tp_comm_overlap`` at tp 1, ``overlap_param_gather`` without ZeRO's gather) gives two
equal components, i.e. the one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Sequence

import numpy as np

from mcflops.hostrng import generator
from mcflops.layout import CLASS_PARAM, OVERLAP_FLAGS, communication_time, overlap_defaults
from mcflops.layout.compute import attention_slowdown

CLASSES = ("tp", "cp", "dp_fwd", "dp_bwd", "pp")  # no benchmark row has experts: ep stays out of the fit
FLAG_SEED = 2  # the flags' draws in :func:`setting_index`, common to every row


def unknown_flags(layout: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The overlap flags neither the row's ``layout`` (its source) nor ``overrides`` state, less FSDP's by-design
    data-parallel two."""
    by_design = overlap_defaults(bool(layout.get("fsdp")))
    return tuple(k for k in OVERLAP_FLAGS
                 if layout.get(k) is None and k not in (overrides or {}) and not by_design[k])


def settings(unknown: Sequence[str]) -> list[dict[str, bool]]:
    """Every setting of the ``unknown`` flags; setting c has flag j on where bit j of c is set (c = 0: all off)."""
    return [{k: bool(c >> j & 1) for j, k in enumerate(unknown)} for c in range(1 << len(unknown))]


def setting_index(unknown: Sequence[str], n: int, modes: int = 1) -> np.ndarray:
    """n draws of a component: a recompute mode of ``modes`` (each 1 / modes) and a setting of the ``unknown``
    flags (each on with probability 1/2), as the index mode x 2^u + setting (:func:`settings`' order). Each flag's
    and the mode's draws come from one fixed stream whatever the row, so two rows that leave the same fields out
    get the same component in each draw (two runs of one series share their software)."""
    u = generator(FLAG_SEED).random((n, len(OVERLAP_FLAGS) + 1))
    out = np.minimum((u[:, -1] * modes).astype(np.int64), modes - 1) << len(unknown)
    for j, k in enumerate(unknown):
        out |= (u[:, OVERLAP_FLAGS.index(k)] < 0.5).astype(np.int64) << j
    return out


# log-MFU noise no row is below, added in quadrature to its stack's scale: what the rows can tell apart (tables print
# MFU to two or three digits, up to 1% rounding, and a run's step time varies by about 1%). A prior choice, not
# fitted; without it a stack whose few rows the terms fit closely drives its scale toward 0, and the posterior
# sharpens until NUTS cannot cross it (held-out refits at R-hat 1.9)
FLOOR = 0.02


def stack_scales(samples: Mapping[str, np.ndarray]) -> np.ndarray | None:
    """Each fitted stack's residual scale as the likelihood reads it, sqrt(sigma_k^2 + FLOOR^2), per posterior draw
    (draws x stacks); None for a fit with one scale (sigma_obs)."""
    per = samples.get("log_sigma_stack")
    return None if per is None else np.hypot(np.exp(per), FLOOR)


# The attention core's efficiency relative to the large GEMMs' (mcflops.layout.compute.attention_slowdown), a
# logit-normal of this mean and sd by the delta method, 90% about [0.30, 0.84]: the kernels the rows ran span
# FlashAttention-1's 25-40% of the A100's peak (as Dao 2023, "FlashAttention-2", abstract, measures it),
# FlashAttention-2's 50-73% forward, less backward (ibid.) and FlashAttention-3's up to 75% of the H100's forward
# (Shah et al. 2024, abstract), over the large GEMMs' 80-90% (Calculon's table, mcflops.layout.compute). The prior of
# every stack and family whose rows cannot measure it (:func:`contrast_groups`), and of a new stack.
STARTING_ATT = (0.6, 0.18)
# In FP8 the GEMMs run against the FP8 peak, twice the BF16 one, while the attention core stays in BF16: Transformer
# Engine's FP8 recipe leaves dot-product attention in higher precision unless asked (DelayedScaling's fp8_dpa, off by
# default; NVIDIA Transformer Engine documentation, "Using FP8 with Transformer Engine"). Relative to the FP8 peak
# its efficiency is then half the BF16 one's: a x BF16 peak / FP8 peak.
ATT_FP8 = 0.5


def attention_logit_prior() -> tuple[float, float]:
    """The logit-normal prior of :data:`STARTING_ATT`: (mean, sd) in logit, the sd by the delta method."""
    m0, s0 = STARTING_ATT
    return math.log(m0 / (1 - m0)), s0 / (m0 * (1 - m0))


def attention_group(stack: str, family: str | None) -> str:
    """The attention kernels' group of a row: its stack on its accelerator family (FP8 rows with their BF16 family's:
    the same kernels, :data:`ATT_FP8`). Kernels are tuned per generation (FlashAttention-2 reaches 50-73% of the A100's
    peak and about 35% of the H100's, FlashAttention-3 up to 75% of the H100's: Shah et al. 2024), so one stack's
    relative efficiency differs by family."""
    return f"{stack}|{(family or '').removesuffix('-fp8')}"


def attention_scale(family: str | None) -> float:
    """The attention core's efficiency's factor against the row's peak: :data:`ATT_FP8` in FP8, 1 else."""
    return ATT_FP8 if (family or "").endswith("-fp8") else 1.0


def contrast_groups(rs: Sequence[Any], held: Collection[str] = ()) -> tuple[str, ...]:
    """The attention groups (:func:`attention_group`) whose fitted rows (not in ``held``) measure the attention core:
    one model of one series on one accelerator and precision run at two sequence lengths or more. Only there does
    the attention share change with the width held fixed. Across models the share grows as s / width, so it moves
    with everything else a small model's GEMMs do, and a term fitted there takes up the width (benchmarks/RESULTS.md,
    "The attention core's term": every stack's value fell to 0.12-0.30 given the freedom). Elsewhere the fit holds
    the kernels at the prior's median and a prediction draws them from the prior."""
    seqs: dict[tuple[str, str], set[str]] = {}
    for r in rs:
        if r.id in held or not getattr(r, "unit", ""):
            continue
        model, seq = str(r.unit).rsplit("|", 1)
        seqs.setdefault((attention_group(r.stack, r.family), model), set()).add(seq)
    return tuple(sorted({g for (g, _), v in seqs.items() if len(v) > 1}))


def row_attention(xp, logit_att, att_k, att_scale):
    """Each row's attention efficiency (rows, or draws x rows with ``logit_att`` draws x groups): its group's fitted
    logit (``att_k`` >= 0, an index into the fit's groups) or the prior's median (-1), times its ``att_scale``."""
    mu, _ = attention_logit_prior()
    if logit_att is None:
        la = xp.full(xp.shape(att_k), mu)
    else:
        la = xp.where(att_k >= 0, xp.take(logit_att, xp.maximum(att_k, 0), axis=-1), mu)
    return att_scale / (1.0 + xp.exp(-la))


def attention_draws(samples: Mapping[str, np.ndarray], groups: Sequence[str], group: str, scale: float = 1.0,
                    rng=None) -> np.ndarray:
    """Per posterior draw, the attention core's efficiency for a run of attention ``group``: the group's fitted one
    where the fit measured it (``groups``: :func:`contrast_groups`), else drawn from the kernels' prior (``rng``; None:
    the prior's median, as the fit holds it), times ``scale`` (:func:`attention_scale`)."""
    n = len(samples["mu_gemm"])
    if group in groups:
        x = np.asarray(samples["logit_attention"])[:, list(groups).index(group)]
    else:
        mu, sd = attention_logit_prior()
        x = np.full(n, mu) if rng is None else mu + sd * rng.standard_normal(n)
    return scale / (1.0 + np.exp(-x))


@dataclass(frozen=True)
class Data:
    """The rows as arrays for the model, with the family, stack and series names of their indices. Per row: ``fam``,
    ``stack``, ``series``, ``log_y``, ``noise`` (shape rows; and ``fit`` where rows are held out); per row and component
    (shape rows x K): ``rho``, ``g``, ``busy``, ``beta``, ``S``, the memory-bound share ``ew`` (E), each class's time
    over T0 ``c_<class>``, its
    window ``w_<class>``, whether it overlaps ``o_<class>``, and the component's ``weight`` (weights sum to 1
    over K)."""

    families: tuple[str, ...]
    stacks: tuple[str, ...]
    arrays: Mapping[str, np.ndarray]
    units: tuple[str, ...] = ()  # each row's unit (fit.unit; mcflops.layoutfit.rowres splits the residual by it)
    series: tuple[str, ...] = ()  # the series names (a series: one table of one source, inside one stack)
    attention_groups: tuple[str, ...] = ()  # the groups whose attention efficiency the rows measure (contrast_groups)

    @staticmethod
    def of(rs: Sequence[Any], families: Sequence[str] | None = None, stacks: Sequence[str] | None = None,
           held: Collection[str] = ()) -> Data:
        """``rs``: :class:`mcflops.layoutfit.fit.Row` (``terms``, ``mix``: the components' Terms). With ``held`` (row
        ids), ``fit``: 0 for a held-out row (its likelihood masked out of the model), 1 else."""
        fams = tuple(families or sorted({r.family for r in rs}))
        sts = tuple(stacks or sorted({r.stack for r in rs}))
        ser = tuple(sorted({r.series for r in rs}))
        col = {
            "fam": [fams.index(r.family) for r in rs], "stack": [sts.index(r.stack) for r in rs],
            "series": [ser.index(r.series) for r in rs],
            "log_y": [np.log(r.y) for r in rs], "noise": [r.noise for r in rs]}
        if held:
            col["fit"] = [0.0 if r.id in held else 1.0 for r in rs]
        att = contrast_groups(rs, held)
        groups = [attention_group(r.stack, r.family) for r in rs]
        col["att_k"] = [att.index(g) if g in att else -1 for g in groups]
        col["att_scale"] = [attention_scale(r.family) for r in rs]
        k_max = max(len(r.mix) for r in rs)
        padded = [list(r.mix) + [r.mix[0]] * (k_max - len(r.mix)) for r in rs]
        col["weight"] = [[1.0 / len(r.mix)] * len(r.mix) + [0.0] * (k_max - len(r.mix)) for r in rs]
        for name, of in (("rho", "rho"), ("g", "g"), ("busy", "busy"), ("beta", "bubble"), ("S", "straggler_scale"),
                         ("ew", "ew"), ("attn", "attn")):
            col[name] = [[getattr(t, of) for t in mix] for mix in padded]
        for k in CLASSES:  # each class's time over T0, its window's share of compute, and whether it overlaps
            col[f"c_{k}"] = [[t.comm[k] / t.t0 for t in mix] for mix in padded]
            col[f"w_{k}"] = [[t.window.get(k, 0.0) for t in mix] for mix in padded]
            col[f"o_{k}"] = [[1.0 if k in t.window else 0.0 for t in mix] for mix in padded]
        arr = {k: np.asarray(v, np.int32 if k in ("fam", "stack", "series", "att_k") else np.float64) for k, v in col.items()}
        return Data(fams, sts, arr, tuple(str(getattr(r, "unit", "")) for r in rs), ser, att)


def step_over_t0(xp, a: Mapping[str, Any], eta, x_tp, x_dp, lam=0.0, att=None):
    """(T_c (1 + beta) + X) / T0 of each row and component (``xp``: numpy or jax.numpy): the arithmetic of
    :func:`mcflops.layout.factors` on arrays that broadcast, the overlap flags choosing per element between the
    exposed and the whole time; ``lam`` the elementwise multiplier (the memory-bound time lam E beside the GEMMs',
    repeated by the recompute as they are); ``att`` the attention core's relative efficiency
    (:func:`mcflops.layout.compute.attention_slowdown`; None: the model before the term)."""
    k = attention_slowdown(a.get("attn", 0.0), a["g"], att)
    tc = a["rho"] * (k / (eta * a["g"]) + lam * a.get("ew", 0.0)) / a["busy"]
    mult = {"tp_comm": x_tp, "dp_comm": x_dp}
    x = 0.0
    for k in CLASSES:
        busy = mult[CLASS_PARAM[k]] * a[f"c_{k}"]
        over = communication_time(xp, {k: a[f"c_{k}"]}, {k: a[f"w_{k}"]}, tc, {k: mult[CLASS_PARAM[k]]})
        x = x + xp.where(a[f"o_{k}"] > 0, over, busy)
    return tc * (1.0 + a["beta"]) + x


def by_component(a: Mapping[str, Any]) -> dict[str, Any]:
    """The row arrays with a trailing axis of length 1 on the per-row ones, to broadcast against the components."""
    return {k: v if v.ndim == 2 else v[:, None] for k, v in a.items()}


def mfu_model(a: Mapping[str, Any], logit_eta, log_tp, log_dp, log_cv, log_ew=None, att=None):
    """The model MFU (true FLOPs) of each row and component (rows x K), in jax.numpy; the parameters per row."""
    import jax.numpy as jnp

    b = by_component(a)
    eta = 1.0 / (1.0 + jnp.exp(-logit_eta))
    lam = 0.0 if log_ew is None else jnp.exp(log_ew)
    step = step_over_t0(jnp, b, eta[:, None], jnp.exp(log_tp)[:, None], jnp.exp(log_dp)[:, None], lam, att)
    return 1.0 / step / (1.0 + jnp.exp(log_cv) * b["S"])


def mixture(log_mfu, scale, weight, df: float):
    """The observation's distribution: the components' Student-t(df) in log MFU (rows x K, scale rows) mixed by
    ``weight`` (rows x K; 0 for padding); its log density is the log-sum-exp over the components."""
    import numpyro.distributions as dist

    return dist.MixtureSameFamily(dist.Categorical(probs=weight), dist.StudentT(df, log_mfu, scale[:, None]))


def components(terms_of, lay, unknown: Sequence[str]) -> tuple:
    """Each setting of the ``unknown`` flags (:func:`settings`' order) applied to ``lay`` (a Layout), through
    ``terms_of(layout) -> Terms``."""
    import dataclasses

    return tuple(terms_of(dataclasses.replace(lay, **s)) for s in settings(unknown))


def draw_components(per_component: Sequence[np.ndarray], unknown: Sequence[str], modes: int = 1) -> np.ndarray:
    """Draws of a row's mixture from each component's draws (aligned): per draw, the component drawn by
    :func:`setting_index`."""
    if len(per_component) == 1:
        return per_component[0]
    stacked = np.stack(per_component)
    idx = setting_index(unknown, stacked.shape[1], modes)
    return stacked[idx, np.arange(stacked.shape[1])]


__all__ = ["ATT_FP8", "CLASSES", "Data", "STARTING_ATT", "attention_draws", "attention_group", "attention_logit_prior",
           "attention_scale", "contrast_groups", "row_attention", "by_component", "components", "draw_components", "mfu_model", "mixture", "setting_index",
           "settings", "step_over_t0", "unknown_flags"]
