"""`mcflops arch FILE`: the parameter counts and FLOPs per token of a prior file's architecture or of a
Hugging Face config.json, by component. No sampling: no JAX."""

from __future__ import annotations

import json

from mcflops.errors import SpecError, UsageError
from mcflops.numbers import format_number as f

DEFAULT_SEQ_LEN = 4096
_LABELS = {"attention_projections": "attention projections (Q, K, V, O)",
           "attention_scores_causal": "attention scores, causal",
           "attention_scores_noncausal": "attention scores, non-causal (not in the total)",
           "mlp": "dense MLP", "routed_experts": "routed experts (active)", "router": "router",
           "shared_experts": "shared experts", "logits": "logits (output projection)"}


def add_parser(sub) -> None:
    a = sub.add_parser("arch", help="parameters and FLOPs per token of an architecture, by component",
                       description="Count the total and active parameters and the forward FLOPs per token, by "
                       "component, of FILE: a prior file (its architecture: block) or a Hugging Face config.json.")
    a.add_argument("file", help="a prior file or a config.json")
    a.add_argument("--seq-len", type=int, help="sequence length of the attention scores (default: the prior "
                   f"file's seq_len; {DEFAULT_SEQ_LEN} for a config.json, which does not give it)")
    a.add_argument("--json", action="store_true", help="print the counts as JSON")


def command(args) -> int:
    from mcflops.arch import Shape, counts, read_config

    if args.seq_len is not None and args.seq_len < 1:
        raise UsageError(f"expected a positive integer, got {args.seq_len}", arg="seq_len")
    if str(args.file).endswith(".json"):
        keys = read_config(args.file)
        keys["seq_len"] = args.seq_len or DEFAULT_SEQ_LEN
        shape = Shape(**keys)
    else:
        from mcflops.spec import load_spec

        spec = load_spec(args.file)
        shape = spec.architecture.shape() if spec.architecture is not None else None
        if shape is None:
            raise SpecError("no architecture to count: give architecture: with ffn (the MLP width), a preset: or "
                            "an hf_config:", path=str(args.file), field="architecture")
        if args.seq_len:
            shape = Shape(**{**shape.__dict__, "seq_len": args.seq_len})
    c = counts(shape)
    if args.json:
        print(json.dumps({"seq_len": shape.seq_len, **c.to_dict()}, indent=1))
        return 0
    active = f"{f(c.params_active)} active per token" if c.params_active != c.params_total else "all active"
    print(f"{args.file}: {f(c.params_total)} parameters, {active} ({f(c.embedding)} of them the input embedding)")
    print(f"forward FLOPs per token at seq_len {shape.seq_len}:")
    for k, v in c.flops.items():
        if v:
            print(f"  {_LABELS[k]:<48} {f(v):>10}  {100 * v / c.flops_per_token:5.1f}%")
    print(f"  {'total':<48} {f(c.flops_per_token):>10}")
    print(f"training FLOPs per token (3x forward): {f(c.training_flops_per_token)}; "
          f"6N: {f(6 * c.params_active)} ({100 * (6 * c.params_active / c.training_flops_per_token - 1):+.1f}%)")
    return 0
