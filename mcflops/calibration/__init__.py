"""The calibration: a hierarchical model of effective utilization (MFU x goodput) fitted to the
published runs, its leave-one-out check, and the fit that ships for `mfu: {calibrated: ...}`.

runs.py: the published runs as arrays; model.py: the NumPyro model and its NUTS fit; predict.py:
predictions, the calibrated prior per accelerator family, leave-one-out; export.py: the shipped fit;
splits.py: the validation's held-out folds; baselines.py: what the model must beat; scores.py: coverage and
proper scores; validate.py: every split scored; select.py: the model the grouped validation chooses;
results.py: what `mcflops calibrate` and mcflops.calibrate return, computed once for both.
"""

from mcflops.calibration.baselines import error_floor
from mcflops.calibration.export import export, fit_id, fit_summary
from mcflops.calibration.model import Config, Fit, Sampler, describe_structure, fit
from mcflops.calibration.predict import Loo, LooRow, loo, population_table, predict_hours, predict_log_u
from mcflops.calibration.results import TARGETS, Calibration, calibrate
from mcflops.calibration.runs import KINDS, Runs, data_text, load_runs, runs_from_records
from mcflops.calibration.scores import Predictive, crps_grid, crps_normal
from mcflops.calibration.select import compare as compare_models
from mcflops.calibration.splits import SPLITS, Fold, Split, make_splits
from mcflops.calibration.validate import Validation, validate

__all__ = ["KINDS", "SPLITS", "TARGETS", "Calibration", "Config", "Fit", "Fold", "Loo", "LooRow", "Predictive", "Runs", "Sampler", "Split",
           "Validation", "calibrate", "compare_models", "crps_grid", "crps_normal", "data_text", "describe_structure", "error_floor", "export",
           "fit", "fit_id", "fit_summary", "load_runs", "loo", "make_splits", "population_table", "predict_hours", "predict_log_u",
           "runs_from_records", "validate"]
