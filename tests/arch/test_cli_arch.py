"""`mcflops arch FILE`: a prior file's or a config.json's counts, as text or JSON; bad input in one line."""

from __future__ import annotations

import json

from mcflops.cli.main import main


def run(argv, capsys):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_arch_of_a_prior_file_as_json(capsys):
    rc, out, _ = run(["arch", "priors/llama405b.yaml", "--json"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["params_total"] == 405_853_388_800 and d["seq_len"] == 8192
    assert d["flops_per_token"] == sum(v for k, v in d["components"].items() if k != "attention_scores_noncausal")
    assert d["training_flops_per_token"] == 3 * d["flops_per_token"]


def test_arch_of_a_config_json(tmp_path, capsys):
    cfg = {"model_type": "mixtral", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 32000, "num_local_experts": 8,
           "num_experts_per_tok": 2}
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    rc, out, _ = run(["arch", p, "--seq-len", "32768"], capsys)
    assert rc == 0
    assert "46.70B parameters, 12.88B active per token" in out
    assert "routed experts (active)" in out and "at seq_len 32768" in out


def test_arch_without_a_countable_architecture_is_one_line(tmp_path, capsys):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\nhardware: {accelerator: h100-sxm}\n"
                 "architecture: {layers: 2, d_model: 8, heads: 2, seq_len: 16, vocab: 10}\n"
                 "priors: {params: 1e9, tokens: 1e9, mfu: 0.4}\n")
    rc, out, err = run(["arch", p], capsys)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "no architecture to count" in err


def test_arch_of_a_bad_config_is_one_line(tmp_path, capsys):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"model_type": "falcon"}))
    rc, _, err = run(["arch", p], capsys)
    assert rc == 2 and err.count("\n") == 1 and "model_type: unknown model_type 'falcon'" in err
