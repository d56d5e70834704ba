"""Planning-pass timings in one process (wall/CPU seconds): the first plan (compiles), a second one, a
20,000-draw plan twice, a 20,000-draw compare twice. Run from the repository root:
    TAG=after PYTHONPATH=$PWD JAX_PLATFORMS=cpu MCFLOPS_NO_CACHE=1 python benchmarks/plan_speed.py"""

import os
import time

import mcflops

P = "priors/llama405b.yaml"


def timed(f) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    calls = {
        "first": lambda: mcflops.plan(P, deadline_days=90),
        "second": lambda: mcflops.plan(P, deadline_days=90),
        "plan20k": lambda: mcflops.plan(P, samples=20000, deadline_days=90),
        "again": lambda: mcflops.plan(P, samples=20000, deadline_days=90),
        "cmp20k": lambda: mcflops.compare(P, "priors/llama405b-mfu.yaml", samples=20000),
        "cmp again": lambda: mcflops.compare(P, "priors/llama405b-mfu.yaml", samples=20000),
    }
    parts = [f"{name} {w:.2f}/{c:.2f}" for name, f in calls.items() for w, c in [timed(f)]]
    print(os.environ.get("TAG", ""), " ".join(parts))


if __name__ == "__main__":
    main()
