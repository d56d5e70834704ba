"""The calibration: a hierarchical model of effective utilization (MFU x goodput) fitted to the
published runs, its leave-one-out check, and the fit that ships for `mfu: {calibrated: ...}`.

runs.py: the published runs as arrays; model.py: the NumPyro model and its NUTS fit; predict.py:
predictions, the calibrated prior per accelerator family, leave-one-out; export.py: the shipped fit.
"""

from mcflops.calibration.export import export, fit_id, fit_summary
from mcflops.calibration.model import Config, Fit, Sampler, fit
from mcflops.calibration.predict import Loo, LooRow, loo, population_table, predict_hours, predict_log_u
from mcflops.calibration.runs import KINDS, Runs, data_text, load_runs, runs_from_records

__all__ = ["KINDS", "Config", "Fit", "Loo", "LooRow", "Runs", "Sampler", "data_text", "export", "fit", "fit_id", "fit_summary",
           "load_runs", "loo", "population_table", "predict_hours", "predict_log_u", "runs_from_records"]
