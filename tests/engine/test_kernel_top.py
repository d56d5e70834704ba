"""kernel._top: the exact top-k through strided group maxima equals a full sort (numpy), ties and -inf included."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mcflops.engine.kernel import GROUP, _top


@pytest.mark.parametrize("n, k", [(1 << 12, 64), (1 << 16, 128), (1 << 16, 1 << 12), (1 << 10, 100)])
def test_top_matches_numpy(n, k):
    rng = np.random.default_rng(n + k)
    x = rng.normal(size=n).astype(np.float32)
    x[rng.integers(0, n, n // 8)] = -np.inf  # masked draws
    x[rng.integers(0, n, 50)] = np.float32(3.0)  # ties, some of them in the top
    x[: n // GROUP] = np.round(x[: n // GROUP], 1)  # more ties
    v, i = jax.jit(_top, static_argnums=1)(jnp.asarray(x), k)
    v, i = np.asarray(v), np.asarray(i)
    np.testing.assert_array_equal(v, np.sort(x)[::-1][:k])  # the values, descending
    np.testing.assert_array_equal(x[i], v)  # the indices point at them
    assert len(set(i.tolist())) == k  # each element once
