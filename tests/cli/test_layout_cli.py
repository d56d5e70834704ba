"""The terminal shows a layout run's factors and a layout sweep's table; a sweep value that cannot run is one line."""

from __future__ import annotations

from pathlib import Path

from mcflops.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
FILE = ROOT / "priors" / "llama405b-layout.yaml"


def test_run_prints_where_the_flops_go(tmp_path, capsys):
    rc = main(["run", str(FILE), "--samples", "20000", "--out", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "Where the FLOP/s go" in out and "GEMM efficiency" in out and "->" in out
    assert (tmp_path / "r" / "waterfall.png").is_file()
    # every factor the summary has is a line (the memory-bound one was missing), and the width's largest part
    import json

    lay = json.loads((tmp_path / "r" / "summary.json").read_text())["layout"]
    lines = out.split("Where the FLOP/s go", 1)[1].splitlines()
    assert "memory" in lay["waterfall"]["factors"] and any(line.startswith("  memory-bound ") for line in lines)
    parts = lay["width_parts"]
    top = min(parts["fixed"], key=parts["fixed"].get)
    flat = " ".join(out.split())  # the terminal wraps long lines
    assert f"the MFU prior spans {parts['all']:.2f}x" in flat and f"would leave {parts['fixed'][top]:.2f}x" in flat


def test_sensitivity_prints_a_layout_sweep_and_refuses_a_bad_value(capsys):
    rc = main(["sensitivity", str(FILE), "--samples", "20000", "--sweep", "recompute=none,full"])
    out = capsys.readouterr().out
    assert rc == 0 and "Layout sweep of recompute" in out
    rc = main(["sensitivity", str(FILE), "--samples", "20000", "--sweep", "micro_batch=1,8"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "micro_batch = 8: needs" in err
