"""Conditioning on published figures: importance sampling from the engine's sums, PSIS, NUTS, summaries.

- :func:`posterior` (update.py): the method choice (importance sampling, NUTS, auto) -> :class:`Posterior`
- summaries.py: one summary shape from weighted histograms or draws; importance.py: the weighted sums,
  their diagnostics and the reservoir's resample; conflicts.py: observations no prior draw explains, or
  the prior predictive puts in its outer 1% (check the figure's scope);
  findings.py: the prior file's reported claims and the MFU x goodput finding
- psis.py: Pareto k-hat and its threshold; nuts.py: NUTS (NumPyro); mcse.py: Markov chains' Monte Carlo
  errors (Vehtari et al. 2021); crosscheck.py: NUTS against importance sampling; netcdf.py: posterior.nc
"""

from mcflops.inference.conflicts import conflicts, scope_warnings
from mcflops.inference.findings import findings
from mcflops.inference.importance import ESS_MIN, MIN_BINS, importance_posterior, poor_reasons, reservoir_draws
from mcflops.inference.summaries import HDI_PROB, hist_stats, prob_between, sample_stats
from mcflops.inference.update import METHODS, Posterior, posterior

__all__ = ["ESS_MIN", "HDI_PROB", "METHODS", "MIN_BINS", "Posterior", "conflicts", "findings", "hist_stats",
           "importance_posterior", "poor_reasons", "posterior", "prob_between", "reservoir_draws", "sample_stats",
           "scope_warnings"]
