"""A pilot of another model (``pilot[i].architecture``): a planner measures the stack on a smaller model before the
production run. Its likelihood reads the layout prior's shared draws for the pilot's own model, layout and count,
which must be what a prior file of that pilot computes on its own (the same Latin-hypercube efficiency draws:
common random numbers), and production's MFU is those draws reweighted; a pilot of production's model says the
same as one without the key; a model of the other kind (a mixture of experts for a dense run) and a model that
cannot be counted are one line each."""

import copy
import math

import numpy as np
import pytest

from mcflops.errors import SpecError
from mcflops.priors.quantiles import ppf
from mcflops.spec import load_spec, resolved_dict
from mcflops.spec.reader import read_yaml
from tests.spec.test_pilots import FILE

PILOT = {"count": 64, "architecture": {"preset": "llama3.1-8b"}, "layout": {"tp": 4, "pp": 1},
         "tflops_per_gpu": 420, "source": "an 8B pilot on 64 of the same H100s"}


def _with(*pilots):
    d = copy.deepcopy(read_yaml(FILE))
    d["pilot"] = [dict(p) for p in pilots]
    return load_spec(d, path=str(FILE))


def test_the_likelihood_reads_the_pilot_models_own_prior():
    lp = _with(PILOT).count_dependent["mfu"]
    base = lp.unconditioned()
    # the oracle: the pilot as a prior file of its own (its model, production's layout with the pilot's fields,
    # its count), its MFU in the architecture's FLOPs on the shared draws
    d = copy.deepcopy(read_yaml(FILE))
    d.pop("pilot")
    d["architecture"] = {"preset": "llama3.1-8b"}
    d["hardware"]["count"] = 64
    d["priors"]["mfu"]["layout"] = {**d["priors"]["mfu"]["layout"], "tp": 4, "pp": 1}
    own = load_spec(d, path=str(FILE)).count_dependent["mfu"]
    shared = own.factor_draws(row=False)["mfu"] / own.counting
    (e,) = lp.evidence
    np.testing.assert_allclose(e.shared, shared, rtol=1e-12)
    assert e.observed == pytest.approx(420e12 / base.peak, rel=1e-12)
    # production's weights are that likelihood, normalised (by hand in NumPy; the constant cancels)
    z2 = ((math.log(e.observed) - np.log(shared)) / math.hypot(0.05, base.row_sigma)) ** 2
    w = np.exp(-0.5 * (z2 - z2.min()))
    np.testing.assert_allclose(lp.weights / lp.weights.sum(), w / w.sum(), rtol=1e-9, atol=1e-15)
    # and the 8B's throughput moves production's 70B: a lower one lowers its MFU
    low = _with({**PILOT, "tflops_per_gpu": 300}).priors["mfu"]
    assert ppf(low, [0.5])[0] < ppf(_with(PILOT).priors["mfu"], [0.5])[0]


def test_a_pilot_of_productions_own_model_is_one_without_the_key():
    same = {k: v for k, v in PILOT.items() if k != "architecture"}
    a = _with({**same, "architecture": {"preset": "llama3.1-70b"}, "layout": {"pp": 4}}).count_dependent["mfu"]
    b = _with({**same, "layout": {"pp": 4}}).count_dependent["mfu"]
    np.testing.assert_allclose(a.weights / a.weights.sum(), b.weights / b.weights.sum(), rtol=1e-9, atol=1e-15)


def test_the_block_with_a_model_round_trips_through_the_resolved_file():
    spec = _with(PILOT)
    d = resolved_dict(spec)
    assert d["pilot"][0]["architecture"]["preset"] == "llama3.1-8b" and d["pilot"][0]["architecture"]["layers"] == 32
    again = load_spec(d, path=str(FILE))
    np.testing.assert_array_equal(again.count_dependent["mfu"].weights, spec.count_dependent["mfu"].weights)
    assert "model llama3.1-8b" in spec.count_dependent["mfu"].describe()


@pytest.mark.parametrize("arch, field, says", [
    ({"preset": "mixtral-8x7b"}, "pilot[0].architecture", "the pilot's model is a mixture of experts and production's is dense"),
    ({"layers": 32, "d_model": 4096, "heads": 32, "seq_len": 8192, "vocab": 128256}, "pilot[0].architecture",
     "a pilot's model needs its MLP width"),
    ({"preset": "llama3.1-8b", "layerz": 3}, "pilot[0].architecture", "layerz"),
])
def test_a_pilot_model_that_cannot_be_read_is_one_line(arch, field, says):
    with pytest.raises(SpecError) as e:
        _with({**PILOT, "architecture": arch})
    text = str(e.value)
    assert "\n" not in text and field in text and says in text and text.startswith(str(FILE))


def test_the_command_lines_preset_is_the_blocks_architecture(capsys):
    """`--pilot ...,preset=NAME` (mcflops ladder) is `architecture: {preset: NAME}` in the block: the same weights,
    and the ladder's reproduce line keeps it; an unknown name is one line, exit 2."""
    from mcflops import cli
    from mcflops.analysis import ladder as ladder_mod
    from mcflops.analysis.pilot import parse_pilot
    from mcflops.report.ladder import command

    text = "count=64,tflops_per_gpu=420,tp=4,pp=1,preset=llama3.1-8b"
    rs = ladder_mod.rungs(FILE, None, [parse_pilot(text)])
    cli_w = rs[-1]["spec"].count_dependent["mfu"].weights
    file_w = _with(PILOT).count_dependent["mfu"].weights
    np.testing.assert_allclose(cli_w / cli_w.sum(), file_w / file_w.sum(), rtol=1e-9, atol=1e-15)
    assert "preset=llama3.1-8b" in command({"path": "f.yaml", "seed": 0, "samples": 10, "pilots": [parse_pilot(text)]})
    assert cli.main(["ladder", str(FILE), "--pilot", "count=64,tflops_per_gpu=420,preset=llama9", "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--pilot: preset=llama9: unknown preset 'llama9'" in err
