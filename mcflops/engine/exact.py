"""What the engine knows without sampling: which quantities are equal draw for draw, histogram ranges
that bound every draw, and the inputs' exact bin probabilities and E[e^kd] (from their z -> d maps)."""

from __future__ import annotations

import hashlib

import numpy as np

from mcflops.model.compute import Model, outputs
from mcflops import diskcache, hostrng

ZBOUND = 6.4  # no standard normal the engine draws exceeds this (_rng: largest |z| is 6.34)


def distinct_rows(model: Model) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Quantities that differ (``rows``) and, for each of ``model.names``, the row that holds it.

    Two quantities share a row when they are equal at random probe points of the inputs' centred
    logs (e.g. ``wall_days`` and ``gpu_hours``, or ``flops`` and ``tokens`` when N is fixed): an
    output is a fixed function of the inputs, so equality at generic points means the same function.
    """
    rng = hostrng.generator(20261129)  # probes only: no effect on any draw
    d = {}
    for name, s in zip(model.inputs, model.samplers):
        d[name] = rng.normal(0.0, 0.5, 5) if s.kind != "const" else np.zeros(5)
    v = {**d, **{k: np.asarray(x, np.float64) for k, x in outputs(model, d).items()}}
    rows: list[str] = []
    where: list[int] = []
    for name in model.names:
        x = np.broadcast_to(np.asarray(v[name], np.float64), (5,))
        for r, other in enumerate(rows):
            if np.array_equal(x, np.broadcast_to(np.asarray(v[other], np.float64), (5,))):
                where.append(r)
                break
        else:
            rows.append(name)
            where.append(len(rows) - 1)
    return tuple(rows), tuple(where)


def ranges(model: Model, rows: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The range of every row over all draws the engine can make (the histograms' span): an input's
    d = sampler(z) is non-decreasing in z, and |z| <= ZBOUND (times the row sums of |L| for inputs in
    a copula, z_corr = L z); outputs are monotone in each input (signed sums, and the PaLM term
    log(a e^dN + 1 - a)), so their extremes are at corners of the inputs' box."""
    L = getattr(model, "copula", None)
    zmax = {}
    if L is not None:
        rs = np.abs(np.asarray(L.chol, np.float64)).sum(axis=1)
        zmax = {n: ZBOUND * float(r) for n, r in zip(L.names, rs)}
    box = {}
    for name, smp in zip(model.inputs, model.samplers):
        if smp.kind == "const":
            box[name] = (0.0, 0.0)
        else:
            zb = zmax.get(name, ZBOUND)
            box[name] = (_d_at(smp, -zb), _d_at(smp, zb))
    names = [n for n in model.inputs if box[n][0] != box[n][1]]
    corners = np.array(np.meshgrid(*[[0, 1]] * len(names), indexing="ij")).reshape(len(names), -1) if names \
        else np.zeros((0, 1))  # every input fixed: one point
    d = {n: np.full(corners.shape[1], box[n][0]) for n in model.inputs}
    for i, n in enumerate(names):
        d[n] = np.where(corners[i] == 1, box[n][1], box[n][0])
    v = {**d, **{k: np.asarray(x, np.float64) for k, x in outputs(model, d).items()}}
    lo = np.array([float(np.min(v[r])) for r in rows])
    hi = np.array([float(np.max(v[r])) for r in rows])
    return lo, hi


def _by_table(fn):
    """Memoise a function of a sampler (and floats) by the sampler's numbers: samplers hold JAX arrays,
    which do not hash, and the same prior gives equal tables (make_sampler is memoised too). On disk too
    when the command line keeps host results (mcflops.diskcache: a second run imports no scipy.special)."""
    cache: dict = {}
    name = f"{fn.__module__}.{fn.__qualname__}"

    def wrapper(sampler, *args):
        table = np.asarray(sampler.table)
        key = (sampler.kind, float(sampler.a), float(sampler.b), table.tobytes(), args)
        if key not in cache:
            if len(cache) >= 256:
                cache.clear()
            text = repr((sampler.kind, float(sampler.a), float(sampler.b), str(table.dtype), table.shape,
                         hashlib.sha256(table.tobytes()).hexdigest(), tuple(float(a) for a in args)))
            cache[key] = diskcache.kept(name, text, lambda: fn(sampler, *args))
            cache[key].flags.writeable = False
        return cache[key]

    return wrapper


def _d_at(sampler, z: float) -> float:
    """sampler(z) in float64 on the host (as the kernel maps z, without a JAX dispatch per call)."""
    if sampler.kind == "affine":
        return float(sampler.a) + float(sampler.b) * z
    from mcflops.model.samplers import GRID, ZMAX

    tab = np.asarray(sampler.table, np.float64)
    t = min(max((z + ZMAX) * (GRID / (2 * ZMAX)), 0.0), GRID - 2.0**-10)
    i = int(t)
    return float(tab[i] + (t - i) * (tab[i + 1] - tab[i]))


@_by_table
def bin_probabilities(sampler, lo: float, width: float, nbins: int) -> np.ndarray:
    """Exact probability of each histogram bin (underflow, nbins bins from lo, overflow) for an input:
    d = sampler(z) is non-decreasing in z ~ N(0, 1), so P(d < e) = Phi(z(e)) with z(e) its inverse
    (the same float32 numbers the kernel uses; linear between table nodes, as the kernel interpolates)."""
    from scipy.special import ndtr

    e = lo + width * np.arange(nbins + 1)
    if sampler.kind == "affine":
        z = (e - float(sampler.a)) / float(sampler.b)
    else:
        from mcflops.model.samplers import z_grid

        tab, zg = np.asarray(sampler.table, np.float64), z_grid()
        i = np.clip(np.searchsorted(tab, e, side="right"), 1, len(tab) - 1)
        t0, t1 = tab[i - 1], tab[i]
        frac = np.clip(np.where(t1 > t0, (e - t0) / np.where(t1 > t0, t1 - t0, 1.0), 1.0), 0.0, 1.0)
        z = np.where(e < tab[0], -np.inf, np.where(e >= tab[-1], np.inf, zg[i - 1] + frac * (zg[i] - zg[i - 1])))
    cdf = ndtr(z)
    return np.diff(np.concatenate([[0.0], cdf, [1.0]]))


@_by_table
def exp_moments(sampler) -> np.ndarray:
    """Exact (E[e^d], E[e^2d]) of an input's centred log d = sampler(z), z ~ N(0, 1). Affine d = a + b z:
    E[e^{kd}] = exp(k a + k^2 b^2 / 2). Table (d linear in z on each cell [z0, z1], d = a + b z there):
    the sum over cells of exp(k a + k^2 b^2 / 2) (Phi(z1 - k b) - Phi(z0 - k b)) (completing the square),
    with the constant end values beyond the grid."""
    from scipy.special import log_ndtr

    k = np.array([1.0, 2.0])[:, None]
    if sampler.kind == "affine":
        a, b = float(sampler.a), float(sampler.b)
        with np.errstate(over="ignore"):  # a prior over some 27 decades: E[e^2d] is inf, which summaries show as n/a
            return np.exp(k[:, 0] * a + 0.5 * (k[:, 0] * b) ** 2)
    from mcflops.model.samplers import z_grid

    tab, zg = np.asarray(sampler.table, np.float64), z_grid()
    b = np.diff(tab) / np.diff(zg)
    a = tab[:-1] - b * zg[:-1]
    lo, hi = zg[:-1] - k * b, zg[1:] - k * b
    # log(Phi(hi) - Phi(lo)) on the side where it does not cancel (mirror cells that lie above 0)
    up = lo > 0
    l1, l0 = np.where(up, -lo, hi), np.where(up, -hi, lo)
    with np.errstate(divide="ignore"):
        logp = log_ndtr(l1) + np.log1p(-np.exp(np.minimum(log_ndtr(l0) - log_ndtr(l1), 0.0)))
    cells = np.exp(k * a + 0.5 * (k * b) ** 2 + logp)
    ends = np.exp(k * tab[0] + log_ndtr(zg[0])) + np.exp(k * tab[-1] + log_ndtr(-zg[-1]))
    return cells.sum(axis=1) + ends[:, 0]
