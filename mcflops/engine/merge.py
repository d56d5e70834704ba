"""Adding the calls' outputs on the host, in float64: the device's group sums in group order (``_Merge``;
each group of blocks was added on the device, ``tree.py``), and the PSIS tail and weighted reservoir
selected from the blocks' candidates.

Posterior sums are relative to a running maximum of the log-likelihood and rescaled when it grows (as
in an online softmax); the PSIS tail and the reservoir keep the largest candidates of every block, ties
going to the earlier draw, so that the result does not depend on how blocks are grouped into calls.
"""

from __future__ import annotations

import math

import numpy as np

from mcflops.engine.kernel import KEEP, PassShape
from mcflops.engine.tree import fields, split
from mcflops.engine.summary import ess


def psis_tail(n: int) -> int:
    """M = min(3 sqrt(S), S / 5) (Vehtari et al. 2024): how many of the largest log-weights PSIS fits."""
    return int(min(max(math.ceil(3 * math.sqrt(n)), 1), 0.2 * n))


class _Merge:
    """Adds group sums in group order (float64), keeping the running maximum of the posterior."""

    def __init__(self, n: int, lay: PassShape, posterior: bool, pool: int, nobs: int = 0):
        self.n, self.lay, self.posterior, self.pool = n, lay, posterior, pool
        self.fields = fields(len(lay.rows), len(lay.sampled), lay.nbins, nobs, nx=lay.nx, own=lay.own)
        self._add = self._sections = None  # the sections' float64 sums (tree.fields)
        self._post = _Rescaled(self.fields.get("post", {}))
        self._x = _Rescaled(self.fields.get("x", {}))  # the extra rows' (engine.extras)
        self.xmin = self.xmax = None
        self.first = None
        self.m_top_cap = psis_tail(n) + 1  # the tail is cut to the pool's psis_tail only when read: a pool may grow
        self.pool_w = np.zeros(2)  # the pool's sum w and sum w^2, relative to pool_max (its ESS: pool_ess)
        self.pool_max = -np.inf
        self._top = np.empty(0)  # the tail's candidates so far (unordered: sorted when read)
        # the reservoir so far, in draw order (ties go to the earlier draw); sorted by key when read (``res``)
        self._res = {"key": np.empty(0), "ll": np.empty(0), "D": np.empty((len(lay.rows), 0))}
        self._read: dict | None = None
        self.cut_top = self.cut_res = -np.inf  # the largest k-th value of a sub-block that was cut
        self._pending: list[tuple[np.ndarray, ...]] = []  # blocks' tail and reservoir candidates not yet folded in
        self._npending = 0

    @property
    def log_max(self) -> float:
        return self._post.log_max

    @property
    def pool_ess(self) -> float:
        """Kish's effective sample size of the pool's weights."""
        return ess(*self.pool_w)

    @property
    def m_top(self) -> int:
        return psis_tail(self.pool) + 1

    @property
    def top(self) -> np.ndarray:
        """The pool's largest log-likelihoods, ascending (PSIS tail)."""
        self.settle()
        return np.sort(self._top)[-self.m_top:]

    @property
    def res(self) -> dict:
        """The weighted reservoir: keys (largest first; ties: the earlier draw first), log-likelihoods, draws."""
        self.settle()
        if self._read is None:
            order = np.argsort(-self._res["key"], kind="stable")
            self._read = {"key": self._res["key"][order], "ll": self._res["ll"][order], "D": self._res["D"][:, order]}
        return self._read

    def add_call(self, out: dict, groups: np.ndarray, blocks: np.ndarray, n_valid: np.ndarray,
                 lay: PassShape | None = None) -> None:
        """Add one call's output: its groups' sums at output positions ``groups`` (in group order, those that
        hold draws) and its blocks' selections at call positions ``blocks`` (in block order, those that hold
        draws: ``n_valid`` each). ``lay``: the layout of the call, when not ``self.lay``."""
        lay = self.lay if lay is None else lay
        for j in groups:
            if lay.sums and lay.own:
                self._add_sums(out, j)
            if lay.sums and lay.nx:
                self._add_rows(out, j)
            if self.posterior and "pool" in out:
                self._add_pool_weights(np.asarray(out["pool"][j], np.float64))
        if self.posterior and "top" in out and len(blocks):
            self._add_selections(out, blocks, n_valid, lay)

    def _add_sums(self, out: dict, j: int) -> None:
        """One group's sums, each section one vector of hi and lo (float32) added in float64: a few numpy
        operations per group, whatever the number of fields."""
        self._sections = None
        add = out["add"][j]
        if self._add is None:
            self._add, self.first = _pair(add), np.asarray(out["first"][j], np.float64)
        else:
            np.add(self._add, add[0], out=self._add, dtype=np.float64)
            np.add(self._add, add[1], out=self._add, dtype=np.float64)
        if self.posterior:
            self._post.add(out["post"][j], float(out["m"][j]))

    def _add_rows(self, out: dict, j: int) -> None:
        """One group's extra rows: their sums (rescaled to the running maximum) and extremes."""
        self._x.add(out["x"][j], float(out["xm"][j]))
        lo, hi = np.asarray(out["xmin"][j], np.float64), np.asarray(out["xmax"][j], np.float64)
        self.xmin = lo if self.xmin is None else np.minimum(self.xmin, lo)
        self.xmax = hi if self.xmax is None else np.maximum(self.xmax, hi)

    def rows(self, lo: np.ndarray, width: np.ndarray) -> dict:
        """The extra rows' sums by field (float64, relative to e^log_max; all 0 when no draw had weight), their
        bins (``lo``, ``width``) and extremes."""
        out = split(self._x.vec, self.fields["x"]) if self._x.vec is not None else \
            {k: np.zeros(s) for k, s in self.fields["x"].items()}
        return {**out, "lo": lo, "width": width, "min": self.xmin, "max": self.xmax, "n": self.n,
                "log_max": self._x.log_max}

    def _add_pool_weights(self, pool: np.ndarray) -> None:
        """A group's pool weights: [hi, lo] x [s0, s0w2, m] (m's lo is 0)."""
        m = pool[0, 2]
        if np.isfinite(m):
            s0, s0w2 = pool[0, :2] + pool[1, :2]
            new_max = max(m, self.pool_max)
            a, c = math.exp(self.pool_max - new_max), math.exp(m - new_max)
            self.pool_w = self.pool_w * [a, a * a] + np.array([s0 * c, s0w2 * c * c])
            self.pool_max = new_max

    def _split(self) -> dict:
        if self._sections is None:
            add = split(self._add, self.fields["add"])
            self._sections = {"prior": {k: v for k, v in add.items() if k not in ("below", "inside")},
                              "below": add.get("below"), "inside": add.get("inside"),
                              "post": None if self._post.vec is None else split(self._post.vec, self.fields["post"])}
        return self._sections

    @property
    def prior(self) -> dict:
        """The prior's sums by field (float64; a dict the driver completes with the exact rows)."""
        return self._split()["prior"]

    @property
    def post(self) -> dict | None:
        """The importance-weighted sums by field, relative to e^log_max (None: no draw had weight)."""
        return self._split()["post"]

    @property
    def below(self) -> np.ndarray | None:
        return self._split()["below"]

    @property
    def inside(self) -> np.ndarray | None:
        return self._split()["inside"]

    def _add_selections(self, out: dict, blocks: np.ndarray, n_valid: np.ndarray, lay: PassShape) -> None:
        """The blocks' PSIS-tail and reservoir candidates, all of a call's blocks at once (in block order)."""
        sub = lay.sub
        counts = np.clip(np.asarray(n_valid, np.int64)[:, None] - sub * np.arange(lay.pfrom, lay.psub)[None, :],
                         0, sub)  # [blocks, pool sub-blocks of this call]
        b, s = np.nonzero(counts)  # the sub-blocks that hold draws, in draw order
        b, c = blocks[b], counts[b, s]
        top, rkey = out["top"][b, s], out["rkey"][b, s]  # [S, k]
        if lay.ktop < sub:  # the k-th value of a sub-block that had more draws than it kept
            self.cut_top = max(self.cut_top, float(np.max(top[:, -1], initial=-np.inf, where=c > lay.ktop)))
        if lay.kres < sub:
            self.cut_res = max(self.cut_res, float(np.max(rkey[:, -1], initial=-np.inf, where=c > lay.kres)))
        rD = out["rD"][b, s]  # [S, Q, k]
        self._pending.append((top.reshape(-1), rkey.reshape(-1), out["rll"][b, s].reshape(-1),
                              np.moveaxis(rD, 1, 0).reshape(rD.shape[1], -1)))
        self._npending += rkey.size
        if self._npending > 1 << 16:  # bounded memory: fold the candidates in now and then
            self.settle()

    def settle(self) -> None:
        """Fold the blocks' candidates into the PSIS tail and the reservoir (in block order: ties go to the
        earlier draw, whatever the number of blocks per fold)."""
        if not self._pending:
            return
        tops, keys, lls, Ds = zip(*self._pending)
        self._pending, self._npending = [], 0
        t = np.concatenate([self._top, *tops], dtype=np.float64)
        self._top = np.partition(t, t.size - self.m_top_cap)[-self.m_top_cap:] if t.size > self.m_top_cap else t
        cand_key = np.concatenate([self._res["key"], *keys], dtype=np.float64)
        keep = _largest(cand_key, min(KEEP, self.pool))
        self._res = {"key": cand_key[keep], "ll": np.concatenate([self._res["ll"], *lls], dtype=np.float64)[keep],
                     "D": np.concatenate([self._res["D"], *Ds], axis=1, dtype=np.float64)[:, keep]}
        self._read = None

    def exact(self) -> bool:
        """Whether every sub-block kept all its draws that belong to the overall top (else: widen, rerun)."""
        if not self.posterior:
            return True
        top = self.top
        ok_top = self.cut_top == -np.inf or (top.size >= self.m_top and self.cut_top <= top[0])
        keys = self.res["key"]
        ok_res = self.cut_res == -np.inf or (keys.size >= min(KEEP, self.pool) and self.cut_res < keys[-1])
        return bool(ok_top and ok_res)


class _Rescaled:
    """A section of group sums relative to each group's maximum log-likelihood, added in group order (float64)
    relative to the running maximum ``log_max`` (its sum of squared weights rescaled by the square)."""

    def __init__(self, shapes: dict[str, tuple[int, ...]]):
        self.vec: np.ndarray | None = None
        self.log_max = -np.inf
        self._sq = np.flatnonzero(np.concatenate([np.full(math.prod(s), k == "s0w2") for k, s in shapes.items()])) \
            if shapes else None  # where s0w2 sits in the section's vector

    def add(self, pair, m: float) -> None:
        if not np.isfinite(m):
            return
        vec = _pair(pair)
        if self.vec is None:
            self.vec, self.log_max = vec, m
            return
        new_max = max(m, self.log_max)
        a, c = math.exp(self.log_max - new_max), math.exp(m - new_max)
        if a != 1.0:
            self.vec *= a
            self.vec[self._sq] *= a  # the sum of squared weights scales by a^2
        if c != 1.0:
            vec *= c
            vec[self._sq] *= c
        self.vec += vec
        self.log_max = new_max


def _largest(x: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest of x, ties to the earlier position (the first k of a stable sort by -x, as a
    set), in position order: a partition finds the k-th largest, no sort (a fold per 2^16 candidates)."""
    if x.size <= k:
        return np.arange(x.size)
    thr = np.partition(x, x.size - k)[x.size - k]
    above, at = np.flatnonzero(x > thr), np.flatnonzero(x == thr)
    if np.isnan(thr) or above.size + at.size < k:  # NaN keys: the stable sort's order (NaN last)
        return np.sort(np.argsort(-x, kind="stable")[:k])
    return np.sort(np.concatenate([above, at[: k - above.size]]))


def _pair(v) -> np.ndarray:
    """A device group's sum, carried as hi and lo along axis 0 (``tree.compensated_sum``), in float64."""
    v = np.asarray(v, np.float64)
    return np.asarray(v[0] + v[1])  # an array also for a 0-d sum: it is added into in place


def _expand(d: dict[str, np.ndarray], where: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Sums over distinct rows -> sums over every tracked quantity (rows of equal quantities copied)."""
    ix = np.asarray(where)
    out = {}
    for k, v in d.items():
        if k == "cross":
            out[k] = v[np.ix_(ix, ix)]
        elif np.ndim(v) >= 1 and k not in ("s0", "s0w2"):
            out[k] = v[ix]
        else:
            out[k] = v
    return out
