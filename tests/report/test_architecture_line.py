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


def test_the_napkin_says_what_6n_leaves_out(tmp_path):
    """6N against 3 x the architecture's forward FLOPs (attention scores included), as summary.json counts them;
    a file whose architecture cannot be counted gets no such line."""
    from mcflops.numbers import format_number

    spec = {"name": "left-out", "samples": 5000, "hardware": {"accelerator": "h100-sxm"},
            "architecture": {"preset": "llama3.1-8b"},
            "priors": {"tokens": 15e12, "mfu": {"beta": [0.3, 0.45]}}}
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(spec))
    assert cli.main(["run", str(f), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    a = json.loads((tmp_path / "a" / "summary.json").read_text())["architecture"]
    line = next(x for x in (tmp_path / "a" / "report.md").read_text().splitlines() if x.startswith("What 6N"))
    rel = 100 * abs(a["six_n"] / a["training_flops_per_token"] - 1)
    assert format_number(a["training_flops_per_token"], 4) in line and f"{rel:.1f}% below" in line, line
    assert "sequence length 8,192" in line  # the preset's training sequence length
    plain = {**spec, "architecture": None, "priors": {**spec["priors"], "params": 8e9}}
    del plain["architecture"]
    f.write_text(json.dumps(plain))
    assert cli.main(["run", str(f), "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert "What 6N" not in (tmp_path / "b" / "report.md").read_text()
