"""Adding the blocks' outputs on the host, in block order and in float64 (``_Merge``), and the
PSIS tail and weighted reservoir selected from them.

Posterior sums are relative to a running maximum of the log-likelihood and rescaled when it grows (as
in an online softmax); the PSIS tail and the reservoir keep the largest candidates of every block, ties
going to the earlier draw, so that the result does not depend on how blocks are grouped into calls.
"""

from __future__ import annotations

import math

import numpy as np

from mcflops.engine.kernel import KEEP, Layout
from mcflops.engine.summary import ess


def psis_tail(n: int) -> int:
    """M = min(3 sqrt(S), S / 5) (Vehtari et al. 2024): how many of the largest log-weights PSIS fits."""
    return int(min(max(math.ceil(3 * math.sqrt(n)), 1), 0.2 * n))


class _Merge:
    """Adds block outputs in block order (float64), keeping the running maximum of the posterior."""

    def __init__(self, n: int, lay: Layout, posterior: bool, pool: int):
        self.n, self.lay, self.posterior, self.pool = n, lay, posterior, pool
        self.prior: dict | None = None
        self.post: dict | None = None
        self.log_max = -np.inf
        self.below = self.inside = None
        self.first = None
        self.m_top_cap = psis_tail(n) + 1  # the tail is cut to the pool's psis_tail only when read: a pool may grow
        self.pool_w = np.zeros(2)  # the pool's sum w and sum w^2, relative to pool_max (its ESS: pool_ess)
        self.pool_max = -np.inf
        self._top = np.empty(0)
        self.res = {"key": np.empty(0), "ll": np.empty(0), "D": np.empty((len(lay.rows), 0))}
        self.cut_top = self.cut_res = -np.inf  # the largest k-th value of a sub-block that was cut
        self._pending: list[tuple[np.ndarray, ...]] = []  # blocks' tail and reservoir candidates not yet folded in
        self._npending = 0

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
        return self._top[-self.m_top:]

    def add(self, blk: dict, n_valid: int, lay: Layout | None = None) -> None:
        """Add one block (``lay``: the layout of the call it came from, when not ``self.lay``)."""
        lay = self.lay if lay is None else lay
        if lay.sums:
            self._add_sums(blk)
        if self.posterior and "top" in blk:
            self._add_pool(blk, n_valid, lay)

    def _add_sums(self, blk: dict) -> None:
        prior = {k: np.asarray(v, np.float64) for k, v in blk["prior"].items()}
        self.prior = prior if self.prior is None else {k: self.prior[k] + prior[k] for k in prior}
        if self.first is None:
            self.first = np.asarray(blk["first"], np.float64)
        if not self.posterior:
            return
        b, i = np.asarray(blk["below"], np.float64), np.asarray(blk["inside"], np.float64)
        self.below = b if self.below is None else self.below + b
        self.inside = i if self.inside is None else self.inside + i
        m = float(blk["m"])
        if np.isfinite(m):
            post = {k: np.asarray(v, np.float64) for k, v in blk["post"].items()}
            if self.post is None:
                self.post, self.log_max = post, m
            else:
                new_max = max(m, self.log_max)
                a, c = math.exp(self.log_max - new_max), math.exp(m - new_max)
                self.post = {k: self.post[k] * (a * a if k == "s0w2" else a) + post[k] * (c * c if k == "s0w2" else c)
                             for k in post}
                self.log_max = new_max

    def _add_pool(self, blk: dict, n_valid: int, lay: Layout) -> None:
        s0, s0w2, m = map(float, np.asarray(blk["pool"], np.float64))  # this block's pool sub-blocks' weights
        if np.isfinite(m):
            new_max = max(m, self.pool_max)
            a, c = math.exp(self.pool_max - new_max), math.exp(m - new_max)
            self.pool_w = self.pool_w * [a, a * a] + np.array([s0 * c, s0w2 * c * c])
            self.pool_max = new_max
        sub = lay.sub
        counts = np.clip(n_valid - sub * np.arange(lay.pfrom, lay.psub), 0, sub)  # this call's pool sub-blocks
        top, rkey = np.asarray(blk["top"], np.float64), np.asarray(blk["rkey"], np.float64)
        full_t, full_r = counts > lay.ktop, counts > lay.kres
        if full_t.any():
            self.cut_top = max(self.cut_top, float(np.max(top[full_t, -1])))
        if full_r.any():
            self.cut_res = max(self.cut_res, float(np.max(rkey[full_r, -1])))
        rD = np.asarray(blk["rD"], np.float64)[counts > 0]  # [S, Q, k]
        self._pending.append((top[counts > 0].reshape(-1), rkey[counts > 0].reshape(-1),
                              np.asarray(blk["rll"], np.float64)[counts > 0].reshape(-1),
                              np.moveaxis(rD, 1, 0).reshape(rD.shape[1], -1)))
        self._npending += self._pending[-1][1].size
        if self._npending > 1 << 16:  # bounded memory: fold the candidates in now and then
            self.settle()

    def settle(self) -> None:
        """Fold the blocks' candidates into the PSIS tail and the reservoir (in block order: ties go to the
        earlier draw, whatever the number of blocks per fold)."""
        if not self._pending:
            return
        tops, keys, lls, Ds = zip(*self._pending)
        self._pending, self._npending = [], 0
        t = np.concatenate([self._top, *tops])
        if t.size > self.m_top_cap:
            t = np.partition(t, t.size - self.m_top_cap)[-self.m_top_cap:]
        self._top = np.sort(t)
        cand_key = np.concatenate([self.res["key"], *keys])
        order = np.argsort(-cand_key, kind="stable")[: min(KEEP, self.pool)]
        self.res = {"key": cand_key[order], "ll": np.concatenate([self.res["ll"], *lls])[order],
                    "D": np.concatenate([self.res["D"], *Ds], axis=1)[:, order]}

    def exact(self) -> bool:
        """Whether every sub-block kept all its draws that belong to the overall top (else: widen, rerun)."""
        if not self.posterior:
            return True
        top = self.top
        ok_top = self.cut_top == -np.inf or (top.size >= self.m_top and self.cut_top <= top[0])
        keys = self.res["key"]
        ok_res = self.cut_res == -np.inf or (keys.size >= min(KEEP, self.pool) and self.cut_res < keys[-1])
        return bool(ok_top and ok_res)


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
