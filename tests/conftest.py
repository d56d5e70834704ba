"""Strict JAX in tests (as equinox and diffrax do): rank promotion raises, warnings are errors."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")

from mcflops import engine  # noqa: E402

engine.setup()  # as a run does, before any JAX computation: one CPU device per core, for every test

# Property tests draw from a fixed seed (derandomized) like every other statistical test here: a CI
# failure is reproducible, and a run never depends on a local example database.
settings.register_profile("mcflops", derandomize=True, database=None, deadline=None, print_blob=True)
settings.load_profile("mcflops")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def key():
    return jax.random.key(20261129)
