"""The failures model's degenerate regimes: Daly's higher-order optimum interval against a numerical
maximiser of the complete model, the notes for a goodput under 0.5 or an interval far from the optimum,
and the impossible regimes refused at load (one line, the file's line and field, exit 2)."""

import math

import pytest
from scipy.optimize import minimize_scalar

import mcflops
from mcflops import cli
from mcflops.errors import SpecError
from mcflops.priors import goodput as gp


@pytest.mark.parametrize("delta, m", [(0.005, 3.09), (0.05, 10.0), (0.1, 1.2), (0.5, 1.22)])
def test_higher_order_optimum_is_the_complete_models_maximiser(delta, m):
    best = minimize_scalar(lambda t: -math.log(gp.goodput(1.0 / m, 1, t, delta, 0.1)), bounds=(1e-5, 10 * m),
                           method="bounded", options={"xatol": 1e-10}).x
    ho, fo = gp.daly_interval_higher_order(delta, m), gp.daly_interval(delta, m)
    assert abs(ho - best) / best < 0.5 * (delta / m) ** 1.5  # Daly 2006: the error is of higher order
    assert abs(ho - best) <= abs(fo - best)
    assert gp.daly_interval_higher_order(3.0, 1.0) == 1.0  # delta >= 2M: tau = M


def _file(tmp_path, rate, interval, write=0.5, count=4096):
    p = tmp_path / "f.yaml"
    p.write_text(f"""name: f
hardware: {{accelerator: h100-sxm, count: {count}}}
priors:
  params: 70e9
  tokens: 2T
  mfu: 0.4
  goodput:
    failures:
      rate_per_gpu_hour: {rate}
      checkpoint_interval_h: {interval}
      checkpoint_write_h: {write}
      restart_h: 0.1
""")
    return p


def test_an_impossible_regime_is_refused_at_load(tmp_path, capsys):
    # 2e-4 failures per GPU-hour on 4,096 GPUs (MTBF 1.2 h), checkpoints every 24 h: goodput ~3e-8
    p = _file(tmp_path, 2e-4, 24)
    with pytest.raises(SpecError) as e:
        mcflops.load_spec(p)
    assert e.value.line == 8 and e.value.field == "priors.goodput"
    opt = gp.daly_interval_higher_order(0.5, 1.0 / (2e-4 * 4096))  # delta 0.5 h, M 1.22 h
    assert f"optimum interval is {opt:.3g} h" in str(e.value) and 0.7 < opt < 0.9
    assert cli.main(["run", str(p), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "goodput" in err and not (tmp_path / "out").exists()


def test_a_degenerate_regime_gets_a_note_with_the_optimum(tmp_path):
    spec = mcflops.load_spec(_file(tmp_path, 2e-5, 24, write=0.005))  # MTBF 12 h: goodput 0.32
    notes = spec.count_dependent["goodput"].notes()
    m = 1.0 / (2e-5 * 4096)
    assert len(notes) == 1 and "under 0.5" in notes[0]
    assert f"{gp.daly_interval_higher_order(0.005, m):.3g} h" in notes[0]
    res = mcflops.run(spec, samples=2000)
    assert res.to_dict()["notes"][:1] == notes


def test_a_sound_regime_gets_no_note():
    spec = mcflops.load_spec("priors/llama405b-failures.yaml")  # interval 0.17 h, optimum 0.172 h
    assert spec.count_dependent["goodput"].notes() == []
    # far from the optimum once the cluster is 16x larger (MTBF 12 min): a note there
    assert spec.count_dependent["goodput"].notes(16 * 16384)
