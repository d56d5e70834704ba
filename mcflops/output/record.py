"""What a run produced, as the run folder holds it: :class:`RunRecord`, plain data built once by the API
from what it computed (``mcflops.run(...).record``), and what every writer of a run folder reads (summary.json,
posterior.nc, the figures, the report). Nothing here computes: the figures' data and posterior.nc's groups
are already in it, so writing is drawing and copying."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # annotations only: writing a folder's lock or a JSON file needs neither NumPy nor the spec
    import numpy as np

    from mcflops.inference.netcdf import Groups
    from mcflops.spec import Spec


@dataclass(frozen=True)
class PlotData:
    """The data of a run's figures (inference.plotdata), computed before anything is drawn; None (or empty)
    for a figure the run has nothing to show in."""

    inputs: Mapping[str, Any] | None = None  # prior vs posterior of each uncertain input (posterior_inputs.png)
    ridge: Mapping[str, Any] | None = None  # MFU against goodput, and the curve the data imply
    predictive: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # observed name -> its predictive
    headline: Mapping[str, Any] | None = None  # GPU-hours before and after the published figure (the report's)


@dataclass(frozen=True)
class RunRecord:
    """One run as plain data: ``summary`` is summary.json's content (JSON types: what the report and a
    notebook's ``to_dict`` read), ``draws`` and ``posterior_draws`` the kept draws (linear units), ``plots``
    the figures' data, ``groups`` posterior.nc's content, ``spec`` the resolved spec the run sampled, and
    ``notes`` the run's notes (also in ``summary``). The dicts are not to be changed: copy ``summary``
    before adding to it."""

    spec: Spec
    summary: Mapping[str, Any]
    draws: Mapping[str, np.ndarray]
    posterior_draws: Mapping[str, np.ndarray] | None
    plots: PlotData
    groups: Groups
    notes: tuple[str, ...] = ()

    @property
    def posterior(self) -> Mapping[str, Any] | None:
        """The posterior's summary (summary.json's "posterior"), None without one."""
        return self.summary.get("posterior")

    @property
    def sensitivity(self) -> Mapping[str, Any] | None:
        return self.summary.get("sensitivity")

    @property
    def plan(self) -> Mapping[str, Any] | None:
        """The file's plan: block answered (plan.json's content)."""
        return self.summary.get("plan")

    @property
    def layout(self) -> Mapping[str, Any] | None:
        """A layout MFU prior's account (the waterfall)."""
        return self.summary.get("layout")
