"""The napkin chain against numbers we did not compute (the paper's 3.8e25, published runs' implied MFU), and
against the model that samples it: the float chain, the JAX deviations, the load-time bounds and the
dependency table all come from chain.OUTPUTS and must agree with each other."""

import math
from importlib.resources import files

import jax.numpy as jnp
import numpy as np
import pytest
from ruamel.yaml import YAML

import mcflops
from mcflops import chain
from mcflops import model as model_mod
from mcflops.errors import SpecError

RUNS = YAML(typ="safe", pure=True).load(files("mcflops").joinpath("data/published_runs.yaml").read_text())["runs"]

LLAMA = {
    "name": "t", "hardware": {"accelerator": "h100-sxm", "precision": "bf16", "count": 16384},
    "priors": {"params": 405.9e9, "tokens": 15.6e12, "mfu": 0.40},
    "observe": {"gpu_hours": {"value": 30.84e6, "sigma": 0.05}},
}


def test_llama405b_chain():
    """6ND = 3.8e25 (paper Sec. 3.2.1); 30.84M H100-hours imply MFU 0.346 at goodput 1."""
    ch = chain.chain(mcflops.load_spec(LLAMA))
    assert ch["flops"] == pytest.approx(6 * 405.9e9 * 15.6e12, rel=1e-12)
    assert ch["flops"] == pytest.approx(3.8e25, rel=0.01)
    assert ch["gpu_hours"] == pytest.approx(3.799e25 / (989.4e12 * 0.40 * 3600), rel=1e-3)
    assert ch["implied_mfu"] == pytest.approx(0.346, abs=5e-4)


def test_implied_mfu_at_median_goodput():
    spec = mcflops.load_spec({**LLAMA, "priors": {**LLAMA["priors"], "goodput": {"uniform": [0.8, 1.0]}}})
    ch = chain.chain(spec)
    assert ch["goodput"] == pytest.approx(0.9)
    assert ch["implied_mfu_at_median_goodput"] == pytest.approx(ch["implied_mfu"] / 0.9, rel=1e-12)


@pytest.mark.parametrize("run", RUNS, ids=[r["id"] for r in RUNS])
def test_published_runs_implied_mfu(run):
    """Every published run's implied MFU (the data file's column, 4 decimals) to 1e-3."""
    precision = "fp16" if run["accelerator"] == "v100" else "bf16"
    spec = mcflops.load_spec({
        "name": "t", "hardware": {"accelerator": run["accelerator"], "precision": precision},
        "priors": {"params": run["params_active"], "tokens": run["tokens"], "mfu": 0.5},
        "observe": {"gpu_hours": {"value": run["hours"]}},
    })
    assert chain.chain(spec)["implied_mfu"] == pytest.approx(run["implied_mfu"], abs=1e-3)


def test_palm_and_megatron_conventions_by_hand():
    """PaLM App. B: 6N + 12*L*H*Q*T; Megatron Eq. 3 (no recompute): 72*l*h^2*(1 + s/6h + V/12lh)."""
    arch = {"layers": 126, "d_model": 16384, "heads": 128, "seq_len": 8192, "vocab": 128256}
    palm = mcflops.load_spec({**LLAMA, "flops": "palm", "architecture": arch})
    per = chain.flops_per_token(palm, 405.9e9)
    assert per == 6 * 405.9e9 + 12 * 126 * 128 * 128 * 8192
    # the convention alone moves the implied MFU from 0.346 to about 0.37 (DESIGN.md)
    assert chain.chain(palm)["implied_mfu"] == pytest.approx(0.3458 * per / (6 * 405.9e9), rel=1e-3)
    assert 0.37 <= chain.chain(palm)["implied_mfu"] <= 0.38
    meg = mcflops.load_spec({**LLAMA, "flops": "megatron", "architecture": arch})
    h, l, s, v = 16384, 126, 8192, 128256
    assert chain.flops_per_token(meg, None) == pytest.approx(72 * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)), rel=1e-12)
    assert 0.36 <= chain.chain(meg)["implied_mfu"] <= 0.38


def test_outputs_need_their_inputs():
    spec = mcflops.load_spec({**LLAMA, "priors": {**LLAMA["priors"], "price": 2.5}})
    ch = chain.chain(spec)
    assert ch["wall_days"] == pytest.approx(ch["gpu_hours"] / 16384 / 24)
    assert ch["cost"] == pytest.approx(ch["gpu_hours"] * 2.5)
    assert ch["energy_mwh"] == pytest.approx(ch["gpu_hours"] * 700 / 1e6)  # H100 SXM TDP 700 W, PUE 1
    assert set(spec.outputs) == {"flops", "gpu_hours", "wall_days", "cost", "energy_mwh"}
    assert math.isfinite(ch["implied_mfu"])


# ----------------------------------------------------------------------------------------------------
# the float chain and the JAX model are one chain

# The model's outputs are exp(float64 centre + float32 deviation). The chain evaluated at the inputs' own
# values (exp(centre + d), the same float32 d) cancels the inputs' rounding; what is left is the float32 sum of
# an output's terms: at most five additions (and PaLM's exp and log), each rounding by half an ulp of a
# number of order 1 (6e-8). The float64 centres and the chain's own products err by ~1e-14.
REL = 1e-6

ARCHS = {  # synthetic architectures for the conventions that need one
    "405b-like": {"layers": 126, "d_model": 16384, "heads": 128, "seq_len": 8192, "vocab": 128256},
    "wide-heads": {"layers": 32, "d_model": 4096, "heads": 32, "head_dim": 160, "seq_len": 4096, "vocab": 32000},
    "big-vocab": {"layers": 24, "d_model": 2048, "heads": 16, "seq_len": 2048, "vocab": 256000},
}
UNCERTAIN = {"params": {"lognormal": [300e9, 450e9]}, "tokens": {"lognormal": [14e12, 17e12]},
             "mfu": {"beta": {"mean": 0.38, "sd": 0.04}}, "goodput": {"uniform": [0.8, 0.97]},
             "price": {"lognormal": [2.0, 5.0]}, "power": {"uniform": [600, 750]}, "pue": {"uniform": [1.05, 1.3]},
             "peak_flops": {"lognormal": [0.9e15, 1.0e15]}}


def _spec(flops, arch, priors=UNCERTAIN, count=16384):
    hw = {"accelerator": "h100-sxm", "precision": "bf16", **({"count": count} if count else {})}
    shape = dict(ARCHS[arch]) if arch else None
    if flops == "architecture":  # counted from the shape: it needs the MLP width, and params would be checked
        shape = {**shape, "ffn": 4 * shape["d_model"]}
        priors = {k: v for k, v in priors.items() if k != "params"}
    return mcflops.load_spec({"name": "t", "hardware": hw, "flops": flops, "priors": dict(priors),
                              **({"architecture": shape} if shape else {})})


def _model_at(spec, z):
    """Every quantity of the model at standard-normal scores z, in float64: exp(centre + deviation)."""
    m = model_mod.build_model(spec)
    v = model_mod.evaluate(m, {n: jnp.asarray(z.get(n, 0.0), jnp.float32) for n in m.inputs})
    return {n: math.exp(m.centers[n] + float(v[n])) for n in m.centers}


def _agree(spec, z):
    x = _model_at(spec, z)
    ch = chain.chain(spec, {n: x[n] for n in spec.priors})
    assert set(spec.outputs) <= set(ch)
    for out in spec.outputs:
        assert x[out] == pytest.approx(ch[out], rel=REL), (out, z)


@pytest.mark.parametrize("run", RUNS, ids=[r["id"] for r in RUNS])
def test_model_is_the_float_chain_on_published_runs(run):
    """Point priors for params, tokens, MFU and price on the run's accelerator: the model at z = 0 is chain.chain()."""
    precision = "fp16" if run["accelerator"] == "v100" else "bf16"
    spec = mcflops.load_spec({
        "name": "t", "hardware": {"accelerator": run["accelerator"], "precision": precision, "count": 2048},
        "priors": {"params": run["params_active"], "tokens": run["tokens"], "mfu": 0.4, "price": 2.0},
    })
    assert {"flops", "gpu_hours", "wall_days", "cost"} <= set(spec.outputs)
    x, ch = _model_at(spec, {}), chain.chain(spec)
    for out in spec.outputs:
        assert x[out] == pytest.approx(ch[out], rel=REL), out
    assert ch["flops"] == 6.0 * run["params_active"] * run["tokens"]


@pytest.mark.parametrize("flops", chain.CONVENTIONS)
@pytest.mark.parametrize("arch", ARCHS)
def test_model_is_the_float_chain_off_centre(flops, arch):
    """Every convention on synthetic architectures, every input uncertain, at the centre and away from it
    (the PaLM term log(alpha e^dN + 1 - alpha) is not a plain sum: it must still be 6N + 12LHQT)."""
    spec = _spec(flops, arch)
    rng = np.random.default_rng(7)
    for z in ({}, {n: 1.5 for n in spec.priors}, {n: -2.0 for n in spec.priors},
              dict(zip(spec.priors, rng.normal(0.0, 1.5, len(spec.priors)).tolist()))):
        _agree(spec, z)


@pytest.mark.parametrize("flops", chain.CONVENTIONS)
def test_dependency_table_is_the_model(flops):
    """An output depends on input x iff moving x's deviation moves it."""
    spec = _spec(flops, "405b-like")
    m = model_mod.build_model(spec)
    d0 = {n: jnp.zeros((), jnp.float32) for n in m.inputs}
    base = model_mod.outputs(m, d0)
    assert ("params" in m.inputs) == (flops not in ("megatron", "architecture"))  # the shape alone sets FLOPs
    for out in spec.outputs:
        deps = chain.depends(out, flops)
        assert set(deps) <= set(m.inputs), (out, deps)
        for x in m.inputs:
            moved = float(model_mod.outputs(m, {**d0, x: d0[x] + 0.25})[out]) != float(base[out])
            assert moved == (x in deps), (out, x)
    for x in m.inputs:
        assert chain.depends(x, flops) == (x,)


def test_dependency_order():
    """The order the conflict messages name the priors in."""
    gpu = ("params", "tokens", "peak_flops", "mfu", "goodput")
    assert chain.depends("flops", "6nd") == ("params", "tokens")
    assert chain.depends("gpu_hours", "palm") == chain.depends("wall_days", "6nd") == gpu
    assert chain.depends("cost", "6nd") == gpu + ("price",)
    assert chain.depends("energy_mwh", "6nd") == gpu + ("power", "pue")
    assert chain.depends("gpu_hours", "megatron") == gpu[1:]


def test_available_outputs_follow_their_inputs():
    """Days need hardware.count, cost a price, energy a power (and PUE, defaulted with it): the rule the
    README states, written out by hand here."""
    for count in (None, 512):
        for priors in (UNCERTAIN, {k: v for k, v in UNCERTAIN.items() if k not in ("price", "power", "pue")}):
            spec = _spec("6nd", None, priors, count)
            want = ("flops", "gpu_hours") + (("wall_days",) if count else ()) + \
                (("cost",) if "price" in spec.priors else ()) + (("energy_mwh",) if "power" in spec.priors else ())
            assert chain.available(spec.priors, spec.hardware.count) == spec.outputs == want


@pytest.mark.parametrize("flops", chain.CONVENTIONS)
def test_log_bounds_are_the_model_at_the_corners(flops):
    """The load-time extremes: every output is monotone in each input, so its extremes over a box of inputs
    are the model's at the box's corners."""
    spec = _spec(flops, "wide-heads")
    m = model_mod.build_model(spec)
    unc = [n for n in m.inputs if n in spec.uncertain]
    box = {n: (float(m.sampler(n)(jnp.float32(-3.0))), float(m.sampler(n)(jnp.float32(3.0)))) for n in unc}
    corners = np.array(np.meshgrid(*[[0, 1]] * len(unc), indexing="ij")).reshape(len(unc), -1)
    d = {n: jnp.zeros(corners.shape[1], jnp.float32) for n in m.inputs}
    for i, n in enumerate(unc):
        d[n] = jnp.asarray(np.where(corners[i] == 1, box[n][1], box[n][0]), jnp.float32)
    out = model_mod.outputs(m, d)
    ranges = {n: tuple(m.centers[n] + x for x in box.get(n, (0.0, 0.0))) for n in m.inputs}
    bounds = chain.log_bounds(flops, spec.architecture, ranges, spec.hardware.count)
    assert tuple(bounds) == spec.outputs
    for name, (lo, hi) in bounds.items():
        v = m.centers[name] + np.asarray(out[name], np.float64)
        assert (lo, hi) == pytest.approx((v.min(), v.max()), abs=1e-5), name


def test_output_range_refused_at_load():
    """Energy below 1e-300 in the tails: one line naming the output, as before the bounds moved to chain.py."""
    with pytest.raises(SpecError, match=r"these priors let energy_mwh reach \[1e-\d+, 1e-\d+\] in their 1e-15 "
                                        r"tails, beyond what a float holds; check the units and spreads "
                                        r"\(most extreme input: power\)"):
        mcflops.load_spec({"name": "t", "priors": {"params": 1e-60, "tokens": 1e-60, "mfu": 0.4, "peak_flops": 1e99,
                                                   "power": 3e-100}})


def test_napkin_text():
    """The terminal's FLOPs line per convention."""
    fill = {"params": "405B", "flops_per_token": "2.6T"}
    assert chain.CONVENTIONS["6nd"].napkin.format(**fill) == "6·N·D = 6 x 405B"
    assert chain.CONVENTIONS["palm"].napkin.format(**fill) == "FLOPs/token x D = (6N + 12·L·H·Q·T) 2.6T"
    assert chain.CONVENTIONS["megatron"].napkin.format(**fill) == "FLOPs/token x D = 72·l·h²(1 + s/6h + V/12lh) 2.6T"
