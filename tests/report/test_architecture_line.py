"""The report's assumptions state the architecture as the file gave it, presets and config paths included."""

import json

from mcflops import cli


def test_a_preset_architecture_renders(tmp_path):
    spec = {"name": "preset", "samples": 5000, "hardware": {"accelerator": "h100-sxm", "count": 1024},
            "architecture": {"preset": "llama3.1-8b"},
            "priors": {"tokens": {"lognormal": [14e12, 16e12]}, "mfu": {"beta": [0.3, 0.45]}}}
    f = tmp_path / "preset.yaml"
    f.write_text(json.dumps(spec))  # JSON is YAML
    out = tmp_path / "out"
    assert cli.main(["run", str(f), "--out", str(out), "--quiet"]) == 0
    md = (out / "report.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("Architecture:"))
    assert "preset llama3.1-8b" in line and "layers 32" in line and "d\\_model 4,096" in line, line
    summary = json.loads((out / "summary.json").read_text())
    assert round(summary["architecture"]["params_total"] / 1e9, 2) == 8.03  # Llama 3.1 8B: 8.03B parameters
