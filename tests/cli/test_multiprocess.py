"""Two local processes joined by jax.distributed (CPU, Gloo) give the summary one process gives over the
same two devices, bit for bit; process 0 alone writes and prints, its `--json` on stdout parses (Gloo's
"Rank N is connected" lines go to stderr), and process 1 prints nothing on stdout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from tests.test_golden import _strip

HERE = Path(__file__).resolve().parents[1]
OK = HERE / "bad" / "ok" / "small.yaml"
RUN = [sys.executable, "-m", "mcflops.cli", "run", str(OK), "--json", "--quiet"]


def _env(**kw) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "MCFLOPS_", "XLA_"))}
    return {**env, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(HERE.parent), **kw}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_give_the_single_process_summary(tmp_path):
    port = _free_port()
    procs = [subprocess.Popen([*RUN, "--out", str(tmp_path / f"host{i}")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                              env=_env(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_NUM_PROCESSES="2",
                                       JAX_PROCESS_ID=str(i), MCFLOPS_CPU_DEVICES="1"))
             for i in range(2)]
    single = subprocess.run([*RUN, "--out", str(tmp_path / "single")], capture_output=True, text=True,
                            cwd=tmp_path, env=_env(MCFLOPS_CPU_DEVICES="2"), timeout=300)
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    assert single.returncode == 0, single.stderr[-2000:]
    printed = json.loads(outs[0][0])  # stdout is the JSON document and nothing else
    assert outs[1][0] == ""
    assert printed["device"] == json.loads(single.stdout)["device"] == "cpu:cpu x2"
    written = json.loads((tmp_path / "host0" / "summary.json").read_text())
    alone = json.loads((tmp_path / "single" / "summary.json").read_text())
    assert _strip(written) == _strip(alone)  # every number the same float
    assert not (tmp_path / "host1").exists()
