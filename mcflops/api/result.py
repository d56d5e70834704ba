"""What a run produced, as a notebook shows it: :class:`Result` (a few lines, an HTML table, quantiles, a
table of rows, an ArviZ DataTree, the run folder) over its record (``Result.record``, output.RunRecord: what
the files are written from)."""

from __future__ import annotations

import copy
import html
import math
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from mcflops.api.record import jsonable as jsonable
from mcflops.numbers import format_number
from mcflops.output.record import RunRecord
from mcflops.spec import Spec

if TYPE_CHECKING:
    from mcflops.engine.summary import Sums
    from mcflops.model.compute import Model

HEADLINE = ("gpu_hours", "wall_days", "cost")  # what a notebook's display leads with (those the spec has)


def device_name() -> str:
    import jax

    d = jax.devices()[0]
    kind = getattr(d, "device_kind", "") or ""
    return f"{d.platform}:{kind} x{jax.device_count()}" if kind else f"{d.platform} x{jax.device_count()}"


@dataclass
class Result:
    """What a run produced: summaries as plain data, a bounded set of draws, and the raw sums. :func:`run`
    assembles it from what the layers return; nothing below this module writes into it.

    ``posterior_draws`` hold one draw fewer than ``draws`` (engine.KEEP - 1): the reservoir keeps the KEEP
    largest keys and the smallest of them is the threshold that weights the others (priority sampling), so it
    is not itself a draw. In a notebook it shows as a few lines (``repr``) or a table (``_repr_html_``)."""

    spec: Spec = field(repr=False)
    seed: int
    samples: int
    chain: dict[str, float] = field(repr=False)
    prior: dict[str, dict[str, float]] = field(repr=False)
    observed: dict[str, dict[str, Any]] = field(repr=False)
    draws: dict[str, np.ndarray] = field(repr=False)  # kept prior draws (linear units), at most engine.KEEP each
    posterior: dict[str, Any] | None = field(default=None, repr=False)
    posterior_draws: dict[str, np.ndarray] | None = field(default=None, repr=False)
    sensitivity: dict[str, Any] | None = field(default=None, repr=False)
    device: str = ""
    timings: dict[str, float] = field(default_factory=dict, repr=False)
    sums: Sums | None = field(default=None, repr=False)  # the engine's reduced sums (histograms: quantile)
    model: Model | None = field(default=None, repr=False)  # the compute model (its log-space centres)
    notes: list[str] = field(default_factory=list, repr=False)
    plan: dict[str, Any] | None = field(default=None, repr=False)  # the file's plan: block answered (plan.json's)
    layout: dict[str, Any] | None = field(default=None, repr=False)  # a layout MFU prior's account (waterfall)
    context: dict[str, Any] | None = field(default=None, repr=False)  # the MFU in context (analysis.context)

    def __repr__(self) -> str:
        lines = [f"Result({self.spec.name}: {self.samples:,} draws, seed {self.seed}, {self.device}, "
                 f"{self.timings.get('total_s', 0.0):.2f} s)"]
        for name in self._headline():
            line = f"  {name:<10} prior p5 {_q(self.prior[name], 'p5')}, p50 {_q(self.prior[name], 'p50')}, " \
                   f"p95 {_q(self.prior[name], 'p95')}"
            if self.posterior and isinstance(self.posterior.get(name), dict):
                line += f"; posterior p50 {_q(self.posterior[name], 'p50')}"
            lines.append(line)
        if self.posterior:
            lines.append(f"  posterior: {self._diagnostics()}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle: bool) -> None:  # IPython's pretty printer
        p.text(repr(self))

    def _repr_html_(self) -> str:
        """The headline (p5 / p50 / p95 of GPU-hours, days and cost; the posterior beside the prior when there
        is one), the posterior's diagnostics and the notes; every piece of the file's text escaped."""
        esc = html.escape
        cols = ["prior p5", "prior p50", "prior p95"]
        if self.posterior:
            cols += ["posterior p5", "posterior p50", "posterior p95"]
        head = "".join(f"<th>{c}</th>" for c in ["quantity", *cols])
        rows = []
        for name in self._headline():
            cells = [_q(self.prior[name], k) for k in ("p5", "p50", "p95")]
            if self.posterior:
                post = self.posterior.get(name)
                cells += [_q(post, k) if isinstance(post, dict) else "" for k in ("p5", "p50", "p95")]
            rows.append(f"<tr><td>{esc(name)}</td>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
        parts = [f"<div class=\"mcflops-result\"><p><b>{esc(self.spec.name)}</b> {esc(self.spec.description or '')}<br>"
                 f"<small>seed {self.seed} &middot; {self.samples:,} draws &middot; {esc(self.device)}</small></p>",
                 f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"]
        if self.posterior:
            parts.append(f"<p>posterior: {esc(self._diagnostics())}</p>")
        if self.notes:
            parts.append("<ul>" + "".join(f"<li>{esc(n)}</li>" for n in self.notes) + "</ul>")
        return "".join(parts) + "</div>"

    def _headline(self) -> list[str]:
        return [n for n in HEADLINE if isinstance(self.prior.get(n), dict)]

    def _diagnostics(self) -> str:
        post = self.posterior or {}
        out = [f"method {post.get('method')}", f"ESS {post.get('ess', float('nan')):,.0f}"]
        for k, label in (("pareto_k", "Pareto k"), ("max_r_hat", "max R-hat"), ("divergences", "divergences")):
            if post.get(k) is not None:
                out.append(f"{label} {post[k]:.3g}" if isinstance(post[k], float) else f"{label} {post[k]}")
        return ", ".join(out)

    def quantile(self, name: str, q, which: str | None = None):
        """Quantile(s) ``q`` (in [0, 1]) of ``name`` under the prior or the posterior (``which``; default: the
        posterior when there is one), read the way the summary reads its p5..p95: from the run's histogram
        (prior, importance-sampled posterior) or from the draws (NUTS). A float for a float ``q``, else an array."""
        from mcflops.engine import summary

        which = which or ("posterior" if self.posterior else "prior")
        if which not in ("prior", "posterior") or (which == "posterior" and not self.posterior):
            raise ValueError(f"which: expected 'prior'{' or posterior' if self.posterior else ''}, got {which!r}")
        qs = np.asarray(q, np.float64)
        if np.any((qs < 0) | (qs > 1)):
            raise ValueError(f"q: expected quantiles in [0, 1], got {q!r}")
        if name in self.spec.priors and self.spec.priors[name].family == "point":
            out = np.full(qs.shape, float(self.spec.priors[name].params["value"]))
        elif self.sums is None or name not in self.sums.names:
            raise KeyError(f"{name!r} is not a quantity of this run (quantities: {', '.join(self.prior)})")
        elif which == "posterior" and self.posterior.get("method") == "nuts":
            out = np.quantile(np.asarray(self.posterior_draws[name], np.float64), qs)
        else:
            i = self.sums.names.index(name)
            s = self.sums.prior if which == "prior" else self.sums.post
            v = summary.hist_quantiles(s["hist"][i], self.sums.lo[i], self.sums.width[i], qs.ravel())
            # math.exp, element by element, as the summary's p5..p95 are computed (the same floats)
            out = np.asarray([math.exp(self.model.centers[name] + float(x)) for x in v]).reshape(qs.shape)
        return float(out) if out.ndim == 0 else out

    def table(self):
        """The summaries of every input and output as rows (quantity, distribution, mean, sd, p5..p95,
        mcse_p50): a pandas DataFrame when pandas is installed, else a list of dicts. Derived entries with
        fewer statistics (the posterior's ``mfu_x_goodput``: p5, p50, p95 and log-sds) stay in
        ``res.posterior``: a row of them would be half empty."""
        from mcflops.engine.summary import QUANTILES

        cols = ("mean", "sd", *QUANTILES, "mcse_p50")
        rows = []
        for which, stats in (("prior", self.prior), ("posterior", self.posterior or {})):
            for name, st in stats.items():
                if isinstance(st, dict) and all(c in st for c in cols):
                    rows.append({"quantity": name, "distribution": which, **{c: st.get(c) for c in cols}})
        try:
            import pandas
        except ImportError:
            return rows
        return pandas.DataFrame(rows)

    def to_arviz(self):
        """The prior, posterior, observed data and log-likelihood as an ArviZ DataTree: what posterior.nc holds."""
        from mcflops.inference import netcdf

        return netcdf.to_datatree(self.record.groups)

    def write(self, out: str | Path) -> dict[str, Any]:
        """Write the run folder `mcflops run` writes (summary.json, spec.resolved.yaml, posterior.nc, the
        figures, report.md and report.html) into ``out``, swapped into place as a whole; ``out`` must be new,
        empty or a previous report. Returns summary.json's content."""
        from mcflops import output

        return output.write_run(Path(out), self.record, field="out")

    @cached_property
    def record(self) -> RunRecord:
        """The run as plain data (output.RunRecord: summary.json's content, the kept draws, the figures' data,
        posterior.nc's groups, the spec), built on first use and then kept: what the run folder is written
        from. Changing this object's fields afterwards does not change it."""
        from mcflops.api import record

        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "model"}
        return record.build(**kept, centers=self.model.centers if self.model is not None else {})

    def to_dict(self) -> dict[str, Any]:
        """The content of summary.json (plain JSON types): a copy, the caller's to change."""
        return copy.deepcopy(dict(self.record.summary))


def _q(stats: Mapping[str, Any], k: str) -> str:
    v = stats.get(k)
    return format_number(v) if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"

