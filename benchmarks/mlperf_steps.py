"""The step times behind layout_runs.yaml's MLPerf rows, re-read from MLCommons' result logs.

    git clone https://github.com/mlcommons/training_results_v3.1   # and v3.0, v4.0, v4.1
    .venv/bin/python benchmarks/mlperf_steps.py training_results_v3.1 [more clones ...]

For every ``results/<system>/gpt3/`` folder of each clone (read at its HEAD with ``git show``, so a bare mirror
works too) it prints the logged global batch, accumulation steps and sequence length and, per log, the two step
times the rows' ``obtained`` describes: the median block time per step (block_stop - block_start over the
block's epoch_count tokens / (global batch x sequence), first block dropped; evaluation lies outside the blocks)
and the median of NeMo's ``train_step_timing`` (steps 4 on). A row's iteration_time_s is the median over its
three logs of the block figure, or of the step timer where a round's logs time one block for the whole run (v3.0).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, errors="replace", check=True).stdout


def step_times(text: str) -> dict:
    """A log's batch figures and its two median step times (None where the log has too few to tell)."""
    first: dict = {}
    steps: list[float] = []
    blocks: list[tuple[int, float]] = []
    start = None
    for line in text.splitlines():
        i = line.find(":::MLLOG ")
        if i < 0:
            continue
        try:
            rec = json.loads(line[i + 9:])
        except ValueError:
            continue
        key, value = rec["key"], rec["value"]
        if key == "tracked_stats" and isinstance(value, dict):
            steps += [value[k] for k in ("train_step_timing", "train_step_timing in s") if k in value]
        elif key == "block_start":
            start = rec
        elif key == "block_stop" and start is not None:
            blocks.append((start["metadata"]["epoch_count"], (rec["time_ms"] - start["time_ms"]) / 1000.0))
            start = None
        else:
            first.setdefault(key, value)
    gbs, seq = first.get("global_batch_size"), first.get("max_sequence_length")
    per_block = [t * gbs * seq / tokens for tokens, t in blocks[1:]] if gbs and seq else []
    return {"global_batch": gbs, "accumulation": first.get("gradient_accumulation_steps"), "seq": seq,
            "platform": first.get("submission_platform"),
            "block_step_s": statistics.median(per_block) if len(per_block) > 1 else None,
            "timer_step_s": statistics.median(steps[3:]) if len(steps) > 4 else None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("repos", nargs="+", help="clones of mlcommons/training_results_v*")
    a = p.parse_args(argv)
    for repo in a.repos:
        files = [f for f in _git(repo, "ls-tree", "-r", "--name-only", "HEAD").split()
                 if re.search(r"/results/[^/]+/gpt3/result_[^/]*\.txt$", f)]
        for f in sorted(files):
            print(json.dumps({"repo": repo, "log": f, **step_times(_git(repo, "show", f"HEAD:{f}"))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
