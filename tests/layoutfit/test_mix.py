"""The layout fit's mixture over unknown overlap flags, against oracles outside the fit's code: the model's log
density (NumPyro's log_density and log_likelihood) against scipy's Student-t density of each setting's MFU from
mcflops.layout.mfu (the prior's NumPy path, not the fit's arrays), mixed 1:1 with scipy's logsumexp."""

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import special, stats

from mcflops.layoutfit import fit as lf
from mcflops.layoutfit.data import benchmark_rows
from mcflops.layoutfit.mix import Data, settings
from mcflops import hardware
from mcflops.arch import counts
from mcflops.layout import OVERLAP_FLAGS, memory, mfu

PARAMS = {"mu_gemm": 0.3, "tau_family": 0.4, "tau_stack_gemm": 0.2, "mu_log_tp_comm": -0.3,
          "tau_stack_tp_comm": 0.5, "mu_log_dp_comm": 0.2, "tau_stack_dp_comm": 0.3,
          "mu_log_straggler_cv": math.log(0.003), "sigma_obs": 0.12, "tau_sigma": 0.6,
          "mu_log_elementwise": math.log(12.0)}
M0, S0 = 0.6, 0.18  # the attention kernels' prior (mean, sd), as mix.STARTING_ATT states it from the FlashAttention papers


def _runs():
    """One run of each kind: the recompute and every flag stated or on by design (torchtitan under FSDP), all three flags and the
    recompute unknown (vTrain), TP overlap only (llm-foundry under FSDP, DP flags on by design), a second
    vTrain run, and the llm-foundry run's model at another sequence length (so that its attention kernels are measured)."""
    rs = benchmark_rows()
    stated = next(r for r in rs if r.layout["recompute"] is not None and r.layout["tp_comm_overlap"] is not None
                  and (r.layout["fsdp"] or all(r.layout[k] is not None for k in OVERLAP_FLAGS)))
    vtrain = [r for r in rs if r.series.startswith("vtrain") and all(r.layout[k] is None for k in OVERLAP_FLAGS)
              and r.layout["tp"] > 1 and r.layout["dp"] > 1]  # every flag acts: eight distinct components
    def model_of(r):
        return r.series, r.model, r.accelerator, r.precision

    foundry, longer = next((a, b) for a in rs if a.series.startswith("llm-foundry") and a.layout["fsdp"]
                           for b in rs if model_of(b) == model_of(a) and b.layout["fsdp"]
                           and b.architecture["seq_len"] != a.architecture["seq_len"])
    return [stated, vtrain[0], foundry, vtrain[7], longer]


def _modes(run):
    """The recompute modes whose activations fit (every mode when the source is silent), from mcflops.layout.memory."""
    if run.layout["recompute"] is not None:
        return [run.layout["recompute"]]
    out = []
    for mode in ("none", "selective", "full"):
        shape, _ = lf.shape_of(run)
        lo, _ = lf.layout_of(run, shape, {"recompute": mode})
        cap = run.memory_gb or hardware.get(run.accelerator).memory_gb
        if memory(lo, shape, counts(shape), cap, float(run.count)).headroom >= 0:
            out.append(mode)
    return out or ["full"]


def _params(d):
    rng = np.random.default_rng(3)
    p = {k: np.asarray(v) for k, v in PARAMS.items()}
    for k in ("z_family",):
        p[k] = rng.standard_normal(len(d.families))
    for k in ("z_stack_gemm", "z_stack_tp_comm", "z_stack_dp_comm"):
        p[k] = rng.standard_normal(len(d.stacks))
    # each stack's residual scale (centred about sigma_obs), one of them under the floor
    p["log_sigma_stack"] = math.log(PARAMS["sigma_obs"]) + PARAMS["tau_sigma"] * rng.standard_normal(len(d.stacks))
    p["log_sigma_stack"][0] = math.log(0.01)
    # each series' own GEMM term inside its stack
    p["tau_series"] = np.asarray(0.3)
    p["z_series"] = rng.standard_normal(len(d.series))
    # the measured groups' own attention kernels, in logit (drawn last: the draws above are as before)
    p["logit_attention"] = math.log(0.3 / 0.7) + 0.3 * rng.standard_normal(len(d.attention_groups))
    return p


def _draws_by_hand(r, d, p, attention=True):
    """Row ``r``'s efficiency parameters from the model's parameters ``p`` (its family's and stack's effects), by
    hand: the oracle's side of the fit's arithmetic. The attention kernels: the fitted logit of the row's stack on its
    family where the rows measure it (``d.attention_groups``), the prior's median M0 else; half of it against the FP8
    peak."""
    f, s = d.families.index(r.family), d.stacks.index(r.stack)
    logit = p["mu_gemm"] + p["tau_family"] * p["z_family"][f] + p["tau_stack_gemm"] * p["z_stack_gemm"][s]
    if "z_series" in p:
        logit = logit + p["tau_series"] * p["z_series"][d.series.index(r.series)]
    group = f"{r.stack}|{r.family.removesuffix('-fp8')}"
    a = None
    if attention:
        a = (1 / (1 + math.exp(-p["logit_attention"][d.attention_groups.index(group)]))
             if group in d.attention_groups else M0) * (0.5 if r.family.endswith("-fp8") else 1.0)
    return {"gemm": np.array([1 / (1 + math.exp(-logit))]),
            "tp_comm": np.array([math.exp(p["mu_log_tp_comm"] + p["tau_stack_tp_comm"] * p["z_stack_tp_comm"][s])]),
            "dp_comm": np.array([math.exp(p["mu_log_dp_comm"] + p["tau_stack_dp_comm"] * p["z_stack_dp_comm"][s])]),
            "ep_comm": np.array([1.0]), "straggler_cv": np.array([math.exp(p["mu_log_straggler_cv"])]),
            **({"elementwise": np.array([math.exp(p["mu_log_elementwise"])])} if "mu_log_elementwise" in p else {}),
            **({"attention": np.array([a])} if attention else {})}


def _oracle_rows(runs, rows, d, p, attention=True):
    """Each row's log likelihood: log of the mean over the settings of its unknown flags of the Student-t(4) density
    of log y at the log of mcflops.layout.mfu for that setting (the flags stated as overrides)."""
    out = []
    for run, r in zip(runs, rows):
        draws = _draws_by_hand(r, d, p, attention)
        unknown = [k for k in OVERLAP_FLAGS if run.layout[k] is None and not (run.layout["fsdp"] and k != "tp_comm_overlap")]
        lps = []
        for mode, bits in itertools.product(_modes(run), itertools.product((False, True), repeat=len(unknown))):
            one = lf.prepare(run, layout={**dict(zip(unknown, bits)), "recompute": mode})
            assert len(one.mix) == 1
            m = float(mfu(one.terms, draws)[0])
            # the stack's scale with the floor in quadrature (fit.FLOOR), times the row's noise
            sigma = math.hypot(math.exp(p["log_sigma_stack"][d.stacks.index(r.stack)]), lf.FLOOR)
            lps.append(stats.t.logpdf(math.log(r.y), 4.0, loc=math.log(m), scale=sigma * r.noise))
        out.append(float(special.logsumexp(lps) - math.log(len(lps))))
    return np.asarray(out)


def test_rows_carry_their_unknown_flags():
    runs = _runs()
    rows = [lf.prepare(r) for r in runs]
    assert [r.modes for r in rows] == [tuple(_modes(r)) for r in runs]
    assert [len(r.mix) for r in rows] == [len(_modes(r)) * n for r, n in zip(runs, (1, 8, 2, 8, 2))]
    assert rows[1].modes == ("none", "selective", "full")  # a row that mixes every mode
    assert rows[1].unknown == OVERLAP_FLAGS and rows[2].unknown == ("tp_comm_overlap",)
    assert settings(("a", "b"))[0] == {"a": False, "b": False} and settings(("a", "b"))[1] == {"a": True, "b": False}
    d = Data.of(rows)
    k = max(len(r.mix) for r in rows)
    assert d.arrays["weight"].shape == (5, k) and np.allclose(d.arrays["weight"].sum(axis=1), 1.0)
    assert list(d.arrays["weight"][0]) == [1.0] + [0.0] * (k - 1)  # padding at weight 0


def test_log_likelihood_is_the_mixture_scipy_computes():
    import jax
    import jax.numpy as jnp
    from numpyro.infer.util import log_likelihood

    runs = _runs()
    rows = [lf.prepare(r) for r in runs]
    d = Data.of(rows)
    p = _params(d)
    with jax.enable_x64(True):  # in 64 bits for a tight comparison (the fit itself runs in 32)
        a = {k: jnp.asarray(v) for k, v in d.arrays.items()}
        ll = np.asarray(log_likelihood(lf.model, {k: jnp.asarray(v)[None] for k, v in p.items()}, a, len(d.families),
                                       len(d.stacks), True, len(d.series), True, True,
                                       len(d.attention_groups))["obs"][0])
    want = _oracle_rows(runs, rows, d, p)
    np.testing.assert_allclose(ll, want, rtol=1e-9, atol=1e-9)
    # the row with every flag stated: exactly the single component's density, no mixture
    assert ll[0] == pytest.approx(want[0], rel=1e-12)
    # the attention term acts on every row (each row's attention core is 2-5% of its FLOPs), at the prior's median
    # where the rows cannot measure it
    assert all(r.terms.attn > 0.01 for r in rows)
    assert not np.any(np.isclose(_oracle_rows(runs, rows, d, p, attention=False), want, rtol=1e-6))
    # one group is measured, the llm-foundry model at two sequence lengths; moving its kernels moves its two rows'
    # densities and no other's
    assert d.attention_groups == (f"{rows[2].stack}|{rows[2].family}",)
    moved = _oracle_rows(runs, rows, d, dict(p, logit_attention=p["logit_attention"] + 1.0))
    mine = np.array([r.stack == rows[2].stack for r in rows])
    assert mine.sum() == 2
    assert not np.any(np.isclose(moved[mine], want[mine], rtol=1e-6)) and np.array_equal(moved[~mine], want[~mine])


@pytest.mark.parametrize("series,elementwise", [(True, True), (False, False)])
def test_log_density_is_priors_plus_mixture(series, elementwise):
    attention = elementwise  # the terms came in order: series, memory-bound, attention; False: the model before all
    import jax
    import jax.numpy as jnp
    from numpyro.infer.util import log_density

    runs = _runs()
    rows = [lf.prepare(r) for r in runs]
    d = Data.of(rows)
    p = _params(d)
    if not series:  # the model before the series term and the memory-bound one
        p = {k: v for k, v in p.items() if k not in ("tau_series", "z_series", "mu_log_elementwise", "logit_attention")}
    assert len(d.series) == 3  # two vTrain rows share a series (and two llm-foundry rows): one term each, not per row
    with jax.enable_x64(True):
        a = {k: jnp.asarray(v) for k, v in d.arrays.items()}
        got, _ = log_density(lf.model, (a, len(d.families), len(d.stacks), True, len(d.series) if series else 0,
                                         elementwise, attention, len(d.attention_groups)), {},
                             {k: jnp.asarray(v) for k, v in p.items()})
    z95 = stats.norm.ppf(0.95)

    def lognormal(lo, hi):
        return 0.5 * math.log(lo * hi), math.log(hi / lo) / (2 * z95)

    g0, gsd = lf.STARTING["gemm"]
    prior = stats.norm.logpdf(p["mu_gemm"], math.log(g0 / (1 - g0)), 4 * gsd / (g0 * (1 - g0)))
    prior += stats.halfnorm.logpdf(p["tau_family"], scale=0.5) + stats.halfnorm.logpdf(p["tau_stack_gemm"], scale=0.5)
    for k in ("z_family", "z_stack_gemm", "z_stack_tp_comm", "z_stack_dp_comm"):
        prior += stats.norm.logpdf(p[k]).sum()
    for q in ("tp_comm", "dp_comm"):
        prior += stats.norm.logpdf(p[f"mu_log_{q}"], *lognormal(*lf.STARTING[q]))
        prior += stats.halfnorm.logpdf(p[f"tau_stack_{q}"], scale=0.7)
    prior += stats.norm.logpdf(p["mu_log_straggler_cv"], *lognormal(*lf.STARTING["straggler_cv"]))
    prior += stats.halfnorm.logpdf(p["sigma_obs"], scale=0.2) + stats.halfnorm.logpdf(p["tau_sigma"], scale=0.5)
    prior += stats.norm.logpdf(p["log_sigma_stack"], math.log(p["sigma_obs"]), p["tau_sigma"]).sum()
    if series:
        prior += stats.halfnorm.logpdf(p["tau_series"], scale=0.5) + stats.norm.logpdf(p["z_series"]).sum()
    if elementwise:
        prior += stats.norm.logpdf(p["mu_log_elementwise"], *lognormal(*lf.STARTING_EW))
    if attention:  # each measured group's logit-normal, its sd by the delta method from the prior's mean and sd
        prior += stats.norm.logpdf(p["logit_attention"], math.log(M0 / (1 - M0)), S0 / (M0 * (1 - M0))).sum()
    assert float(got) == pytest.approx(prior + _oracle_rows(runs, rows, d, p, attention).sum(), rel=1e-10)


def test_row_draws_mix_the_settings_one_to_one():
    runs = _runs()
    rows = [lf.prepare(r) for r in runs]
    d = Data.of(rows)
    p = _params(d)
    n = 4000
    samples = {k: np.repeat(np.asarray(v)[None], n, axis=0) for k, v in p.items()}
    f = lf.Fit(d, samples, 1.0, float(n), 0, 0.0, 1, n, {})
    for r in rows:
        got = lf.row_draws(f, r)
        # each component's value at these parameters (one draw of each setting, the flags stated)
        per = [float(lf.row_draws(f, dataclasses.replace(r, mix=(t,), unknown=()))[0]) for t in r.mix]
        which = np.argmin(np.abs(got[:, None] - np.asarray(per)[None]), axis=1)
        assert np.allclose(got, np.asarray(per)[which], rtol=1e-12)
        share = np.bincount(which, minlength=len(per)) / n
        if len(r.mix) == 24:  # 24 distinct components: each 1/24 of the draws, within 4.5 SE
            assert len(set(np.round(per, 9))) == 24
            se = math.sqrt((1 / len(per)) * (1 - 1 / len(per)) / n)
            assert np.all(np.abs(share - 1 / len(per)) < 4.5 * se), share
    # two rows that leave the same flags out get the same setting in each draw (common random numbers)
    a, b = (lf.row_draws(f, rows[i]) for i in (1, 3))
    pa = [float(lf.row_draws(f, dataclasses.replace(rows[1], mix=(t,), unknown=()))[0]) for t in rows[1].mix]
    pb = [float(lf.row_draws(f, dataclasses.replace(rows[3], mix=(t,), unknown=()))[0]) for t in rows[3].mix]
    ia = np.argmin(np.abs(a[:, None] - np.asarray(pa)[None]), axis=1)
    ib = np.argmin(np.abs(b[:, None] - np.asarray(pb)[None]), axis=1)
    assert np.array_equal(ia, ib)


def test_attention_kernels_the_rows_do_not_measure_are_drawn_from_the_prior():
    """A row of a measured group (its stack on its family, a model at two sequence lengths) takes that group's fitted
    attention efficiency; a row of a new stack, or of a fitted stack whose rows cannot measure it, draws one per
    posterior draw from the kernels' prior, logit a ~ Normal(logit M0, S0 / (M0 (1 - M0))): with every other
    parameter fixed its MFU is then a monotone function of that draw, so its median is the MFU at a = M0 and its
    quartiles at logit M0 -+ 0.674 sd (each order statistic within 4.5 of its standard error, sqrt(q (1 - q) / n)
    in probability). The other stack effects are set to nothing, so that the attention kernels are all a new stack
    draws."""
    runs = _runs()
    rows = [lf.prepare(r) for r in runs]
    d = Data.of(rows)
    p = _params(d)
    n = 20000
    for k in ("tau_stack_gemm", "tau_stack_tp_comm", "tau_stack_dp_comm"):  # a new stack's other effects: none
        p[k] = np.asarray(0.0)
    samples = {k: np.repeat(np.asarray(v)[None], n, axis=0) for k, v in p.items()}
    f = lf.Fit(d, samples, 1.0, float(n), 0, 0.0, 1, n, {}, True)

    def one(r):  # the row at one component
        return dataclasses.replace(r, mix=r.mix[:1], unknown=(), modes=r.modes[:1])

    r = one(rows[2])  # llm-foundry's, a measured group
    assert np.ptp(lf.row_draws(f, r)) == 0  # the group's own value in every draw
    assert np.ptp(lf.row_draws(f, one(rows[0]))) > 0  # a fitted stack the rows do not measure: the prior's draws
    got = lf.row_draws(f, dataclasses.replace(r, stack="a-stack-not-fitted"))
    assert np.ptp(got) > 0

    def at(logit_a):  # the MFU with every effect fixed and the attention efficiency at sigmoid(logit_a)
        x = {k: v[:1].copy() for k, v in samples.items()}
        x["logit_attention"][:, 0] = logit_a
        return float(lf.row_draws(lf.Fit(d, x, 1.0, 1.0, 0, 0.0, 1, 1, {}, True), r)[0])

    mu, sd = math.log(M0 / (1 - M0)), S0 / (M0 * (1 - M0))
    for q, zq in ((0.25, -stats.norm.ppf(0.75)), (0.5, 0.0), (0.75, stats.norm.ppf(0.75))):
        # the probability the draws put below the MFU at that quantile of logit a (MFU rises with a)
        below = float(np.mean(got < at(mu + sd * zq)))
        assert abs(below - q) < 4.5 * math.sqrt(q * (1 - q) / n), (q, below)


def test_contrast_groups_are_the_models_run_at_several_sequence_lengths():
    """The groups whose attention kernels the fit measures, against the benchmark runs read directly (series, model,
    accelerator, precision and the architecture's sequence length, not the rows' unit strings): a stack on a family
    where one model ran at two sequence lengths or more. Held-out rows do not count."""
    runs = benchmark_rows()
    rows = lf.rows(runs)
    seqs = {}
    for run, r in zip(runs, rows):
        key = (r.stack, r.family.removesuffix("-fp8"), run.series, run.model, run.accelerator, run.precision)
        seqs.setdefault(key, set()).add(run.architecture.get("seq_len"))
    want = sorted({f"{k[0]}|{k[1]}" for k, v in seqs.items() if len(v) > 1})
    d = Data.of(rows)
    assert list(d.attention_groups) == want and len(want) >= 1
    for r, k, scale in zip(rows, d.arrays["att_k"], d.arrays["att_scale"]):
        g = f"{r.stack}|{r.family.removesuffix('-fp8')}"
        assert (k >= 0) == (g in want) and scale == (0.5 if r.family.endswith("-fp8") else 1.0)
    # a group's rows held out: the fit no longer measures it
    first = want[0]
    held = {r.id for r in rows if f"{r.stack}|{r.family.removesuffix('-fp8')}" == first}
    assert first not in Data.of(rows, held=held).attention_groups
