"""Planning-pass timings in one process (wall/CPU seconds): the first plan (compiles), a second one, a
20,000-draw plan twice, a 20,000-draw compare twice. Run from the repository root:
    TAG=after PYTHONPATH=$PWD JAX_PLATFORMS=cpu MCFLOPS_NO_CACHE=1 python benchmarks/plan_speed.py"""
import time, sys, os
import mcflops
def t(f):
    w, c = time.perf_counter(), time.process_time(); f(); return time.perf_counter() - w, time.process_time() - c
P = "priors/llama405b.yaml"
first = t(lambda: mcflops.plan(P, deadline_days=90))
second = t(lambda: mcflops.plan(P, deadline_days=90))
small = t(lambda: mcflops.plan(P, samples=20000, deadline_days=90))
small2 = t(lambda: mcflops.plan(P, samples=20000, deadline_days=90))
cmp1 = t(lambda: mcflops.compare(P, "priors/llama405b-mfu.yaml", samples=20000))
cmp2 = t(lambda: mcflops.compare(P, "priors/llama405b-mfu.yaml", samples=20000))
print(os.environ["TAG"], "first %.2f/%.2f second %.2f/%.2f plan20k %.2f/%.2f again %.2f/%.2f cmp20k %.2f/%.2f again %.2f/%.2f" % (*first, *second, *small, *small2, *cmp1, *cmp2))
