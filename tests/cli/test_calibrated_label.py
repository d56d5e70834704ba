"""The terminal's napkin chain names a calibrated mfu prior for what it is: MFU x goodput."""

from __future__ import annotations

from mcflops.cli.main import main

SPEC = """name: cal
samples: 5000
hardware: {accelerator: h100-sxm, precision: bf16, count: 1024}
priors:
  params: 8e9
  tokens: 1.5T
  mfu: {calibrated: true}
"""


def test_the_chain_says_mfu_x_goodput(tmp_path, capsys):
    f = tmp_path / "cal.yaml"
    f.write_text(SPEC)
    assert main(["run", str(f), "--out", str(tmp_path / "r")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "GPU-hours = FLOPs" in x)
    assert "MFU x goodput (calibrated)" in line


def test_the_report_says_mfu_x_goodput_for_the_posterior(tmp_path):
    from mcflops.cli.main import main as cli

    f = tmp_path / "cal.yaml"
    f.write_text(SPEC + "observe:\n  gpu_hours: {value: 80K, sigma: 0.1}\n")
    assert cli(["run", str(f), "--out", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Posterior MFU × goodput (effective utilization)" in md and "Posterior MFU **" not in md
