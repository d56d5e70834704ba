"""What the report says, section by section, as plain blocks (rendered by :mod:`mcflops.report`).

Reads only the run's summary (summary.json), its resolved spec and the names of its figures; does no
statistics. A section whose inputs are missing says "not computed" instead of failing.
"""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from .numbers import format_number
from .spec import INPUTS, OUTPUTS

HEADLINE_FIGURE = "headline_gpu_hours.png"  # drawn by plots.report.headline


class B(str):
    """Bold text."""


class C(str):
    """Code (a command, a file name, a field)."""


@dataclass
class P:
    parts: Sequence[Any]  # str (text), B (bold), C (code)
    cls: str | None = None  # "missing", "quote", "note"


@dataclass
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[Any]]  # each cell: a str or a list of inline parts
    num: frozenset[int] = frozenset()  # right-aligned (numeric) columns
    src: frozenset[int] = frozenset()  # long source-text columns
    caption: str | None = None
    stack: bool = False  # on a phone, each row becomes a stack of labelled cells (long text columns)


@dataclass
class Fig:
    name: str
    data: bytes
    caption: str


@dataclass
class Items:
    items: Sequence[Sequence[Any]]
    ordered: bool = False


@dataclass
class Sub:
    title: str


@dataclass
class Box:
    blocks: list
    cls: str = "headline"


@dataclass
class Section:
    id: str
    title: str
    blocks: list = field(default_factory=list)


@dataclass
class Document:
    title: str
    description: str
    meta: str
    sections: list[Section]


def missing(what: str, *more: Any) -> P:
    return P([f"Not computed: {what}", *more, "."], "missing")


# ---- numbers for a reader ---------------------------------------------------------------------


def num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def sig(x: float, d: int = 3) -> str:
    """d significant digits, trailing zeros kept: 28.0, 29.5, 0.0441, 123."""
    if abs(x) >= 10**d:
        return f"{x:,.0f}"
    t = f"{x:#.{d}g}"
    return t[:-1] if t.endswith(".") else t


def _parts(name: str, x: float, d: int) -> tuple[str, str, str]:
    """(prefix, number, unit suffix) of a quantity, in the units a reader expects."""
    if name == "gpu_hours":
        return "", f"{sig(x / 1e6, d)}M", ""  # accelerator-hours in millions
    if name in ("mfu", "goodput"):
        return "", f"{100 * x:.{max(d - 2, 1)}f}", "%"
    if name == "wall_days":
        return "", sig(x, d), " days"
    if name == "cost":
        return "$", format_number(x, d), ""
    if name == "price":
        return "$", f"{x:.2f}", "/h"
    if name == "energy_mwh":
        return "", f"{x:,.0f}" if x >= 100 else f"{x:.{d}g}", " MWh"
    if name == "power":
        return "", f"{x:.{d}g}", " W"
    if name == "peak_flops":
        return "", format_number(x, 4), " FLOP/s"
    if name == "pue":
        return "", sig(x, d), ""
    return "", format_number(x, max(d, 3)), ""


def fmt(name: str, x: Any, d: int = 3) -> str:
    if not num(x):
        return "n/a"
    pre, core, suf = _parts(name, float(x), d)
    return f"{pre}{core}{suf}"


def interval(name: str, lo: Any, hi: Any, d: int = 3) -> str:
    """'25.6M–34.7M', '65.1–88.2 days', '35.1–45.0%'."""
    if not (num(lo) and num(hi)):
        return "n/a"
    p1, c1, s1 = _parts(name, float(lo), d)
    p2, c2, s2 = _parts(name, float(hi), d)
    return f"{p1}{c1}–{p2}{c2}{s2}" if s1 == s2 else f"{p1}{c1}{s1}–{p2}{c2}{s2}"


def ordinal(p: float) -> str:
    n = int(round(p))
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def stat(block: Any, name: str) -> dict | None:
    """The stats of one quantity (a dict with p5/p50/p95) or None."""
    d = block.get(name) if isinstance(block, Mapping) else None
    return d if isinstance(d, Mapping) and num(d.get("p50")) else None


def median_ci(name: str, st: Mapping | None) -> str:
    return f"{fmt(name, st['p50'])} (90%: {interval(name, st.get('p5'), st.get('p95'))})" if st else "n/a"


def label(name: str) -> str:
    return {"gpu_hours": "GPU-hours", "wall_days": "wall-clock days", "cost": "cost", "energy_mwh": "energy",
            "mfu": "MFU", "goodput": "goodput", "flops": "FLOPs", "tokens": "tokens (D)", "params": "parameters (N)",
            "peak_flops": "peak FLOP/s", "price": "price", "power": "power", "pue": "PUE"}.get(name, name)


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _count(run) -> int | None:
    spec = run.spec
    if spec is not None and spec.hardware.count:
        return int(spec.hardware.count)
    ch = run.summary.get("chain") or {}
    if num(ch.get("gpu_hours")) and num(ch.get("wall_days")) and ch["wall_days"] > 0:
        return int(round(ch["gpu_hours"] / ch["wall_days"] / 24.0))
    return None


def _accelerator(run) -> str:
    spec = run.spec
    if spec is not None and spec.hardware.accelerator:
        return f"{spec.hardware.accelerator} ({spec.hardware.precision})"
    return "accelerators"


# ---- figures ----------------------------------------------------------------------------------

_SENS = ("tornado", "sobol", "sweep", "fan", "plan", "sensitiv")
_POST = ("posterior", "prior", "ridge", "pair", "mfu", "goodput", "predictive", "density", "trace", "joint", "ppc")
_CAPTIONS = (("tornado", "Tornado: the median when one input moves to its p5 or p95, the others at their medians"),
             ("sobol", "Sobol indices: the share of the output's variance each input explains"),
             ("sweep", "Sweep (fan chart): output quantiles along a grid of one input, the rest sampled"),
             ("fan", "Sweep (fan chart): output quantiles along a grid of one input, the rest sampled"),
             ("plan", "Plan: probability of finishing against accelerator count"),
             ("ridge", "MFU against goodput under the posterior: the published figure fixes their product"),
             ("pair", "MFU against goodput under the posterior: the published figure fixes their product"),
             ("predictive", "GPU-hours: prior predictive and the published figure"),
             ("posterior", "Prior and posterior"))


def caption(name: str) -> str:
    if name == HEADLINE_FIGURE:
        return "GPU-hours before (prior predictive) and after (posterior) the published figure, in millions"
    low = name.lower()
    for key, text in _CAPTIONS:
        if key in low:
            return f"{text} ({name})"
    return name.rsplit(".", 1)[0].replace("_", " ").replace("-", " ").capitalize()


def _figs(run, words: Sequence[str], exclude: Sequence[str] = ()) -> list[str]:
    out = []
    for n in run.figures:
        low = n.lower()
        if n != HEADLINE_FIGURE and any(w in low for w in words) and not any(w in low for w in exclude):
            out.append(n)
    return out


def used_figures(run) -> set[str]:
    return {HEADLINE_FIGURE, *_figs(run, _SENS), *_figs(run, _POST, _SENS)}


def _fig_blocks(run, names: Sequence[str]) -> list:
    return [Fig(n, run.figures[n], caption(n)) for n in names]


# ---- 1. headline ------------------------------------------------------------------------------


def headline(run) -> Section:
    s = run.summary
    sec = Section("headline", "1. Headline")
    prior, post = s.get("prior") or {}, s.get("posterior") or {}
    gh = stat(prior, "gpu_hours")
    if gh is None:
        sec.blocks.append(missing("summary.json has no prior-predictive GPU-hours"))
        return sec
    box = [P([B(f"{fmt('gpu_hours', gh['p50'])} GPU-hours"), " is the median of the prior predictive; "
              f"90% interval {interval('gpu_hours', gh.get('p5'), gh.get('p95'))}."])]
    days, count = stat(prior, "wall_days"), _count(run)
    if days and count:
        box.append(P([f"On {count:,} {_accelerator(run)}: ", B(fmt("wall_days", days["p50"])),
                      f" of wall-clock time (90%: {interval('wall_days', days.get('p5'), days.get('p95'))})."]))
    extra = []
    if stat(prior, "cost"):
        extra += ["Cost at the price prior: ", B(fmt("cost", prior["cost"]["p50"])),
                  f" (90%: {interval('cost', prior['cost'].get('p5'), prior['cost'].get('p95'))}). "]
    if stat(prior, "energy_mwh"):
        e = prior["energy_mwh"]
        extra += ["Energy (accelerator power × PUE): ", B(fmt("energy_mwh", e["p50"])),
                  f" (90%: {interval('energy_mwh', e.get('p5'), e.get('p95'))})."]
    if extra:
        box.append(P(extra))
    for name, o in (s.get("observed") or {}).items():
        box.append(P(_observed_sentence(name, o)))
    m = stat(post, "mfu")
    if m and stat(prior, "mfu"):
        box.append(P(["Given the published figure, the run-average MFU is ", B(fmt("mfu", m["p50"])),
                      f" (90%: {interval('mfu', m.get('p5'), m.get('p95'))}; prior "
                      f"{median_ci('mfu', prior['mfu'])}). See section 3."]))
    sec.blocks.append(Box(box))
    rows = []
    for n in ("gpu_hours", "wall_days", "cost", "energy_mwh", "mfu", "goodput"):
        a, b = stat(prior, n), stat(post, n)
        if a is None or (n in ("mfu", "goodput") and a.get("p5") == a.get("p95")):
            continue
        row = [label(n), fmt(n, (s.get("chain") or {}).get(n)), fmt(n, a["p50"]), interval(n, a.get("p5"), a.get("p95"))]
        if post:
            row += [fmt(n, b["p50"]) if b else "n/a", interval(n, b.get("p5"), b.get("p95")) if b else "n/a"]
        rows.append(row)
    header = ["quantity", "napkin", "prior median", "prior 90%"] + (["posterior median", "posterior 90%"] if post else [])
    sec.blocks.append(Table(header, rows, num=frozenset(range(1, len(header))),
                            caption="Napkin: every input at its median. Prior: before the published figure. "
                            "Posterior: given it."))
    if HEADLINE_FIGURE in run.figures:
        sec.blocks += _fig_blocks(run, [HEADLINE_FIGURE])
    return sec


def _observed_sentence(name: str, o: Mapping) -> list:
    src = f" ({o['source']})" if o.get("source") else ""
    if num(o.get("value")):
        err = f", lognormal error σ = {100 * o['sigma']:.0f}%" if num(o.get("sigma")) else ""
        out: list = ["Published: ", B(f"{fmt(name, o['value'], 4)} {label(name)}"), f"{src}{err}."]
        pct = o.get("prior_percentile")
        if num(pct):
            where = ("inside the priors' 90% interval" if 5 <= pct <= 95 else
                     "outside the priors' 90% interval: the priors, or the figure's scope, are off")
            out.append(f" It sits at the {ordinal(pct)} percentile of the prior predictive, {where}.")
        return out
    if num(o.get("low")) and num(o.get("high")):
        out = [f"Observed: {label(name)} between ", B(interval(name, o["low"], o["high"])), f"{src}."]
        if num(o.get("prior_probability_inside")):
            out.append(f" The priors give that range probability {o['prior_probability_inside']:.2f}.")
        return out
    return [f"Observed {label(name)}{src}."]


# ---- 2. napkin chain --------------------------------------------------------------------------


def napkin(run) -> Section:
    s = run.summary
    sec = Section("napkin", "2. The napkin chain")
    ch = s.get("chain") or {}
    if not all(num(ch.get(k)) for k in ("flops", "gpu_hours", "peak_flops", "mfu", "goodput", "tokens")):
        sec.blocks.append(missing("summary.json has no napkin chain"))
        return sec
    f4 = lambda n, k=None: fmt(n, ch.get(k or n), 4)  # noqa: E731
    conv = s.get("flops_convention", "6nd")
    if conv == "6nd" and num(ch.get("params")):
        flops = ["FLOPs = 6 · N · D = 6 × ", f4("params"), " × ", f4("tokens"), " = ", B(fmt("flops", ch["flops"], 4)),
                 " (Kaplan et al. 2020)."]
    else:
        rule = {"palm": "(6N + 12·L·H·Q·T) per token (PaLM, Chowdhery et al. 2022, App. B)",
                "megatron": "72·l·h²·(1 + s/6h + V/12lh) per token (Narayanan et al. 2021, Eq. 3, no recompute)"}
        flops = [f"FLOPs = {rule.get(conv, conv + ' per token')} × D = ", fmt("flops", ch.get("flops_per_token"), 4),
                 " × ", f4("tokens"), " = ", B(fmt("flops", ch["flops"], 4)), "."]
    steps = [flops, ["GPU-hours = FLOPs / (peak × MFU × goodput) / 3600 = ", fmt("flops", ch["flops"], 4), " / (",
                     f4("peak_flops"), " × ", fmt("mfu", ch["mfu"], 4), " × ", fmt("goodput", ch["goodput"], 4),
                     ") / 3600 = ", B(fmt("gpu_hours", ch["gpu_hours"], 4)), "."]]
    count = _count(run)
    if num(ch.get("wall_days")) and count:
        steps.append([f"Wall-clock = GPU-hours / {count:,} accelerators / 24 = ", B(fmt("wall_days", ch["wall_days"])), "."])
    if num(ch.get("cost")) and num(ch.get("price")):
        steps.append(["Cost = GPU-hours × price = ", fmt("gpu_hours", ch["gpu_hours"], 4), " × ", fmt("price", ch["price"]),
                      " = ", B(fmt("cost", ch["cost"])), "."])
    if num(ch.get("energy_mwh")) and num(ch.get("power")):
        steps.append(["Energy = GPU-hours × power × PUE = ", fmt("gpu_hours", ch["gpu_hours"], 4), " × ",
                      fmt("power", ch["power"]), f" × {ch.get('pue', 1):.3g} / 10⁶ = ", B(fmt("energy_mwh", ch["energy_mwh"])),
                      "."])
    if num(ch.get("implied_mfu_x_goodput")) and num(ch.get("observed_gpu_hours")):
        steps.append(["Backwards, implied MFU: the published ", fmt("gpu_hours", ch["observed_gpu_hours"], 4),
                      " GPU-hours mean MFU × goodput = FLOPs / (peak × hours × 3600) = ",
                      B(f"{ch['implied_mfu_x_goodput']:.3f}"), ": MFU ", B(fmt("mfu", ch.get("implied_mfu"))),
                      " if no time was lost (goodput 1), ", B(fmt("mfu", ch.get("implied_mfu_at_median_goodput"))),
                      f" at the median goodput {fmt('goodput', ch['goodput'])}."])
    sec.blocks += [P(["Each input at its median (a fixed input at its value), as on a whiteboard:"]),
                   Items(steps, ordered=True), Sub("Why the Monte Carlo answer differs"), *_why(run, ch)]
    return sec


def _why(run, ch: Mapping) -> list:
    prior = run.summary.get("prior") or {}
    gh = stat(prior, "gpu_hours")
    if gh is None:
        return [missing("no prior-predictive GPU-hours")]
    nap, med, mean = ch["gpu_hours"], gh["p50"], gh.get("mean")
    rel = 100 * (med / nap - 1)
    out = [P([f"The Monte Carlo median is {fmt('gpu_hours', med, 4)}, {abs(rel):.1f}% "
              f"{'above' if rel >= 0 else 'below'} the napkin's {fmt('gpu_hours', nap, 4)}"
              + (f"; the mean is {fmt('gpu_hours', mean, 4)}." if num(mean) else ".")])]
    shaped = [n for n, d in (run.spec.priors.items() if run.spec else ()) if d.family not in ("point", "lognormal")]
    reasons = [["Medians of a product: the median of a product is the product of the medians only when every "
                "factor is lognormal (symmetric in log space). "
                + (f"Here {_and([label(n) for n in shaped])} {'is' if len(shaped) == 1 else 'are'} not, "
                   "so the product moves." if shaped else "Every uncertain input here is lognormal, so the two "
                   "agree up to Monte Carlo error.")]]
    if num(gh.get("p5")) and num(gh.get("p95")):
        up, down = 100 * (gh["p95"] / med - 1), 100 * (1 - gh["p5"] / med)
        reasons.append([f"Skew: GPU-hours divide by MFU and goodput, so the distribution leans right: the 90% "
                        f"interval reaches {up:.0f}% above the median and {down:.0f}% below"
                        + (", and the mean sits above the median." if num(mean) and mean > med else ".")])
    g = ch.get("goodput")
    if num(g) and g < 1:
        reasons.append([f"Goodput: a napkin that forgets downtime (goodput 1) says {fmt('gpu_hours', nap * g, 4)}; "
                        f"the goodput prior's median {fmt('goodput', g)} adds {100 * (1 / g - 1):.1f}%."])
    else:
        reasons.append(["Goodput: the prior file sets goodput to 1 (no downtime), so every lost hour is hidden "
                        "inside MFU."])
    return out + [Items(reasons)]


# ---- 3. what the published figure implies -----------------------------------------------------


def _ranges(obj: Any, path: tuple = (), depth: int = 0):
    """(path, record) of every P(low <= x <= high) record: {low, high | range: [low, high], probability |
    posterior_probability, prior_probability?, source?}, with low/high/probability filled in."""
    if not isinstance(obj, Mapping) or depth > 3:
        return
    prob = next((obj[k] for k in ("posterior_probability", "probability", "prob") if num(obj.get(k))), None)
    lo, hi = obj.get("low"), obj.get("high")
    if isinstance(obj.get("range"), list) and len(obj["range"]) == 2:
        lo, hi = obj["range"]
    if num(lo) and num(hi) and prob is not None:
        yield path, {**obj, "low": lo, "high": hi, "probability": prob}
        return
    for k, v in obj.items():
        yield from _ranges(v, (*path, str(k)), depth + 1)


def implied(run) -> Section:
    s = run.summary
    sec = Section("implied", "3. What the published figure implies")
    prior, post = s.get("prior") or {}, s.get("posterior")
    if not isinstance(post, Mapping) or not post:
        if s.get("observed"):
            sec.blocks.append(missing("no posterior: summary.json has none"))
        else:
            sec.blocks.append(missing("no posterior: the prior file observes nothing (add an ", C("observe:"),
                                      " block with the published figure)"))
        return sec
    m0, m1 = stat(prior, "mfu"), stat(post, "mfu")
    if m0 and m1:
        sec.blocks.append(P(["Posterior MFU ", B(median_ci("mfu", m1)), " against the prior ", median_ci("mfu", m0),
                             "."]))
    for path, r in _ranges(post):
        if "mfu" in " ".join(path).lower():
            text = [f"Posterior probability that MFU lies in the paper's {interval('mfu', r['low'], r['high'])}: ",
                    B(f"{r['probability']:.2f}")]
            if num(r.get("prior_probability")):
                text.append(f" (prior {r['prior_probability']:.2f})")
            if r.get("flops_convention"):
                text.append(f", with MFU counted by {r['flops_convention']} FLOPs")
            text.append(f". The paper's figure: {r['source']}." if r.get("source") else ".")
            sec.blocks.append(P(text))
    placed: list[str] = []

    def figures(*words: str) -> list:
        names = [n for n in _figs(run, _POST, _SENS) if n not in placed and (not words or any(w in n for w in words))]
        placed.extend(names)
        return _fig_blocks(run, names)

    sec.blocks += figures("posterior", "prior")
    prod = stat(post, "mfu_x_goodput")
    if prod:
        text = ["MFU × goodput, the share of peak FLOP/s the run turned into training over its whole length: ",
                B(median_ci("mfu", prod))]
        if num(prod.get("log_sd")) and num(prod.get("log_sd_mfu")):
            text.append(f"; its log-sd {prod['log_sd']:.3f} against {prod['log_sd_mfu']:.3f} for MFU alone")
        sec.blocks.append(P([*text, "."]))
    corr = post.get("corr_mfu_goodput_log")
    if num(corr):
        strong = corr < -0.2
        sec.blocks.append(P(["The MFU-goodput ridge: the posterior correlation of log MFU and log goodput is ",
                             B(f"{corr:+.2f}"), ". " + (
                                 "The published figure measures their product, not each: a run with less downtime "
                                 "needs a lower MFU to match the same hours, so part of the width of the MFU "
                                 "interval is goodput's uncertainty." if strong else
                                 "They trade off only weakly here; the figure measures their product.")]))
    sec.blocks += figures("ridge", "pair", "joint")
    q = _quote(run)
    if q:
        sec.blocks += [Sub("A sentence a reviewer can quote"), P([q], "quote")]
    sec.blocks += figures()
    names = [n for n in (*(run.spec.uncertain if run.spec else ()), *OUTPUTS) if stat(prior, n) or stat(post, n)]
    if not run.spec:
        names = [n for n in post if stat(post, n)]
    rows = [[label(n), median_ci(n, stat(prior, n)), median_ci(n, stat(post, n))] for n in names]
    sec.blocks.append(Table(["quantity", "prior median (90%)", "posterior median (90%)"], rows, num=frozenset({1, 2}),
                            caption="Every uncertain input and every output, before and after the update."))
    return sec


def _quote(run) -> str | None:
    s = run.summary
    prior, post = s.get("prior") or {}, s.get("posterior") or {}
    m0, m1 = stat(prior, "mfu"), stat(post, "mfu")
    obs = [(n, o) for n, o in (s.get("observed") or {}).items() if num(o.get("value"))]
    if not (m0 and m1 and obs):
        return None
    what = " and ".join(f"{fmt(n, o['value'], 4)} {label(n)}" for n, o in obs)
    conv = {"6nd": "6ND", "palm": "PaLM (6N + attention)", "megatron": "Megatron"}.get(s.get("flops_convention"), "")
    peak = stat(prior, "peak_flops")
    hw = f" against the dense peak of {fmt('peak_flops', peak['p50'])}" if peak and peak["p5"] == peak["p95"] else ""
    text = (f"Conditioning the priors for {s.get('name')} on the published {what} puts the run-average MFU "
            f"({conv} FLOPs{hw}) at {median_ci('mfu', m1)}, against a prior of {median_ci('mfu', m0)}.")
    corr = post.get("corr_mfu_goodput_log")
    if num(corr) and corr < -0.2 and stat(post, "goodput"):
        text += (f" The figure measures MFU × goodput, not each: with goodput "
                 f"{median_ci('goodput', post['goodput'])}, the two trade off (log correlation {corr:+.2f}).")
    return text


# ---- 4. drivers -------------------------------------------------------------------------------


def _cell(v: Any) -> str:
    if num(v):
        return format_number(float(v), 3)
    if isinstance(v, list) and len(v) <= 8 and all(num(x) for x in v):
        return ", ".join(format_number(float(x), 3) for x in v)
    if isinstance(v, (list, Mapping)):
        t = json.dumps(v, default=str)
        return t if len(t) <= 80 else t[:77] + "..."
    return "" if v is None else str(v)


def data_blocks(obj: Any, title: str, depth: int = 0) -> list:
    """Readable tables for plain data of unknown shape (rows of records, columns of lists, scalars)."""
    if isinstance(obj, list) and obj and all(isinstance(r, Mapping) for r in obj):
        cols = list(dict.fromkeys(k for r in obj for k in r))
        return [Table(cols, [[_cell(r.get(c)) for c in cols] for r in obj], caption=title if depth else None)]
    if not isinstance(obj, Mapping) or not obj:
        return [P([f"{title}: {_cell(obj)}"])]
    vals = list(obj.values())
    if all(isinstance(v, Mapping) and v and all(not isinstance(x, (Mapping, list)) for x in v.values()) for v in vals):
        cols = list(dict.fromkeys(k for v in vals for k in v))
        return [Table(["", *cols], [[label(str(k)), *(_cell(v.get(c)) for c in cols)] for k, v in obj.items()],
                      num=frozenset(range(1, len(cols) + 1)), caption=title if depth else None)]
    lists = [v for v in vals if isinstance(v, list)]
    if lists and len(lists) == len(vals) and len({len(v) for v in lists}) == 1 and len(lists[0]) <= 40:
        cols = list(obj)
        return [Table(cols, [[_cell(obj[c][i]) for c in cols] for i in range(len(lists[0]))],
                      num=frozenset(range(len(cols))), caption=title if depth else None)]
    if all(not isinstance(v, (Mapping, list)) for v in vals):
        return [Table(["", "value"], [[label(str(k)), _cell(v)] for k, v in obj.items()], num=frozenset({1}),
                      caption=title if depth else None)]
    if depth >= 2:
        return [P([f"{title}: ", C(_cell(obj))])]
    out: list = []
    for k, v in obj.items():
        out += data_blocks(v, f"{title}: {k}", depth + 1)
    return out


def _sobol_records(obj: Any, path: tuple = (), depth: int = 0):
    """(path, {input: {first, total, ...}}) of every Sobol table inside ``obj``."""
    if not isinstance(obj, Mapping) or depth > 3:
        return
    recs = {k: v for k, v in obj.items() if isinstance(v, Mapping) and num(v.get("first")) and num(v.get("total"))}
    if recs:
        yield path, recs
        return
    for k, v in obj.items():
        yield from _sobol_records(v, (*path, str(k)), depth + 1)


def drivers(run) -> Section:
    sec = Section("drivers", "4. What drives it")
    sens = run.summary.get("sensitivity")
    figs = _figs(run, _SENS)
    if not isinstance(sens, Mapping) or not sens:
        sec.blocks.append(missing("no sensitivity analysis in summary.json"))
        sec.blocks += _fig_blocks(run, figs)
        return sec
    out = str(sens.get("output") or "gpu_hours")
    shown: set[str] = set()

    def figures(word: str) -> list:
        mine = [n for n in figs if word in n.lower() and n not in shown]
        shown.update(mine)
        return _fig_blocks(run, mine)

    sec.blocks.append(Sub("Tornado"))
    tor = sens.get("tornado")
    bars = tor.get("inputs") if isinstance(tor, Mapping) else None
    if isinstance(bars, list) and bars and all(isinstance(b, Mapping) and num(b.get("at_p5")) and
                                               num(b.get("at_p95")) for b in bars):
        sec.blocks += _tornado(out, tor, bars)
    elif tor:
        sec.blocks += data_blocks(tor, "Tornado")
    else:
        sec.blocks.append(missing("no tornado in summary.json"))
    sec.blocks += figures("tornado")

    sec.blocks.append(Sub("Sobol indices"))
    info = sens.get("sobol_info") if isinstance(sens.get("sobol_info"), Mapping) else {}
    found = False
    for key, scale in (("sobol", f"log {label(out)}"), ("sobol_linear", label(out))):
        for path, recs in _sobol_records(sens.get(key)):
            sec.blocks += _sobol_table(run, " / ".join((scale, *path)), recs, info)
            found = True
    if not found:
        why = "; ".join(str(n) for n in sens.get("notes") or () if "sobol" in str(n).lower() or "correlat" in str(n))
        sec.blocks.append(missing(f"no Sobol indices in summary.json{': ' + why if why else ''}"))
    sec.blocks += figures("sobol")
    corr = sens.get("correlations")
    if isinstance(corr, Mapping) and any(isinstance(v, Mapping) for v in corr.values()):
        sec.blocks += _correlations(out, corr)

    sec.blocks.append(Sub("Sweeps"))
    sweeps = sens.get("sweeps")
    if isinstance(sweeps, Mapping) and sweeps:
        for name, sw in sweeps.items():
            ok = isinstance(sw, Mapping) and isinstance(sw.get("values"), list) and isinstance(sw.get("p50"), list)
            sec.blocks += _sweep(str(name), str(sw.get("output", out)), sw) if ok else data_blocks(sw, f"Sweep {name}")
    else:
        sec.blocks.append(missing("no sweep (add ", C("sensitivity: {sweep: {mfu: [0.30, 0.45]}}"),
                                  " to the prior file)"))
    sec.blocks += figures("sweep") + figures("fan")
    for note in sens.get("notes") or ():
        sec.blocks.append(P([f"Note: {note}"], "note"))
    sec.blocks += _fig_blocks(run, [n for n in figs if n not in shown])
    return sec


def _tornado(out: str, tor: Mapping, bars: list) -> list:
    base = tor.get("base")
    top = bars[0]
    inp = str(top.get("input"))
    lead = [B(label(inp)), f" moves {label(out)} most: {fmt(out, top['at_p5'])} with {label(inp)} at its p5 "
            f"({fmt(inp, top.get('input_p5'))}), {fmt(out, top['at_p95'])} at its p95 ({fmt(inp, top.get('input_p95'))})"]
    if num(base):
        lead.append(f", a swing of {100 * abs(top['at_p95'] - top['at_p5']) / base:.0f}% of the "
                    f"{fmt(out, base)} with every input at its median.")
    rows = [[label(str(b.get("input"))), f"{fmt(str(b.get('input')), b.get('input_p5'))} → {fmt(out, b['at_p5'])}",
             f"{fmt(str(b.get('input')), b.get('input_p95'))} → {fmt(out, b['at_p95'])}",
             f"{100 * abs(b['at_p95'] - b['at_p5']) / base:.1f}%" if num(base) else "n/a"] for b in bars]
    return [P(lead), Table(["input", f"at its p5 → {label(out)}", f"at its p95 → {label(out)}", "swing"], rows,
                           num=frozenset({1, 2, 3}), caption="Each uncertain input at its p5 and p95, the others "
                           "at their medians; sorted by swing (% of the all-medians value).")]


def _correlations(out: str, corr: Mapping) -> list:
    cols, data = [], {}
    for which, block in corr.items():
        if not isinstance(block, Mapping):
            continue
        for kind, name in (("pearson_log", "Pearson (logs)"), ("spearman", "Spearman (ranks)")):
            if isinstance(block.get(kind), Mapping):
                cols.append(f"{which}: {name}")
                for inp, v in block[kind].items():
                    data.setdefault(inp, {})[cols[-1]] = v
    if not cols:
        return []
    rows = [[label(k), *(f"{v[c]:+.2f}" if num(v.get(c)) else "n/a" for c in cols)] for k, v in data.items()]
    return [Table(["input", *cols], rows, num=frozenset(range(1, len(cols) + 1)),
                  caption=f"Correlation of each input with {label(out)} (meaningful with correlated inputs, where "
                  "Sobol indices are not).")]


def _sweep(name: str, out: str, sw: Mapping) -> list:
    vals, p50 = sw["values"], sw["p50"]
    p5, p95 = sw.get("p5") or [None] * len(vals), sw.get("p95") or [None] * len(vals)
    if not vals or len(p50) != len(vals):
        return data_blocks(dict(sw), f"Sweep {name}")
    text = [f"With {label(name)} fixed at {fmt(name, vals[0])}, the median {label(out)} is ",
            B(fmt(out, p50[0])), f" (90%: {interval(out, p5[0], p95[0])}); at {fmt(name, vals[-1])} it is ",
            B(fmt(out, p50[-1])), f" (90%: {interval(out, p5[-1], p95[-1])})"]
    if num(p50[0]) and num(p50[-1]) and p50[-1]:
        text.append(f", a factor of {p50[0] / p50[-1]:.2f}. The other inputs are sampled from their priors.")
    rows = [[fmt(name, v), fmt(out, b), fmt(out, a), fmt(out, c)] for v, a, b, c in zip(vals, p50, p5, p95)]
    return [P(text), Table([label(name), "p5", "median", "p95"], rows, num=frozenset({0, 1, 2, 3}),
                           caption=f"{label(out)} along the sweep of {label(name)}.")]


def _sobol_records(obj: Any, path: tuple = (), depth: int = 0):
    """(path, {input: {first, total, ...}}) of every Sobol table inside ``obj``."""
    if not isinstance(obj, Mapping) or depth > 3:
        return
    recs = {k: v for k, v in obj.items() if isinstance(v, Mapping) and num(v.get("first")) and num(v.get("total"))}
    if recs:
        yield path, recs
        return
    for k, v in obj.items():
        yield from _sobol_records(v, (*path, str(k)), depth + 1)


def _sobol_table(run, where: str, recs: Mapping, info: Mapping) -> list:
    order = sorted(recs, key=lambda k: -recs[k]["total"])

    def pm(r: Mapping, k: str) -> str:
        se = r.get(f"{k}_se")
        return f"{r[k]:.3f} ± {se:.3f}" if num(se) else f"{r[k]:.3f}"

    top = recs[order[0]]
    first_sum = sum(r["first"] for r in recs.values())
    out = [P([f"{where}: ", B(label(order[0])), f" explains the most: first-order index {top['first']:.2f}, "
              f"total {top['total']:.2f} (1 = all of the variance). The first-order indices add up to "
              f"{first_sum:.2f}" + (": the output is close to additive in these inputs." if abs(first_sum - 1) < 0.05
                                    else ": interactions carry the rest.")]),
           Table(["input", "first-order (± s.e.)", "total (± s.e.)"], [[label(k), pm(recs[k], "first"),
                 pm(recs[k], "total")] for k in order], num=frozenset({1, 2}),
                 caption=f"Sobol indices of {where}" + (f" ({info['estimators']}; {info.get('base_samples', '?')} "
                                                        "base draws)" if info.get("estimators") else "") + ".")]
    if "posterior" in where.lower() or (run.spec is not None and run.spec.extras.get("correlations")):
        out.append(P(["Caution: Sobol indices assume independent inputs; these inputs are correlated "
                      "(a copula, or the posterior's MFU-goodput ridge), so read the indices as rough."], "note"))
    return out


# ---- 5. assumptions ---------------------------------------------------------------------------


def assumptions(run) -> Section:
    sec = Section("assumptions", "5. Assumptions")
    spec, prior = run.spec, run.summary.get("prior") or {}
    if spec is None:
        sec.blocks.append(missing("spec.resolved.yaml is missing or unreadable, so the priors cannot be listed"))
        return sec
    h = spec.hardware
    hw = [f"Hardware: {h.count:,} × " if h.count else "Hardware: ", C(str(h.accelerator or "custom peak")),
          f" in {h.precision}. FLOPs convention: ", C(spec.flops), "."]
    sec.blocks.append(P(hw))
    rows = []
    for name, d in spec.priors.items():
        st = stat(prior, name)
        ci = "fixed" if d.family == "point" else interval(name, st.get("p5"), st.get("p95")) if st else "n/a"
        rows.append([[C(name)], INPUTS.get(name, ("", "", "", ""))[3], d.describe(), ci, d.source or "none given"])
    sec.blocks.append(Table(["input", "meaning", "prior", "90% interval", "source"], rows, num=frozenset({3}),
                            src=frozenset({4}), caption="Every prior, with its distribution and its source.",
                            stack=True))
    if spec.observe:
        obs = []
        for n, o in spec.observe.items():
            what = (f"between {fmt(n, o.low, 4)} and {fmt(n, o.high, 4)}" if o.noise == "between" else
                    f"{fmt(n, o.value, 4)}, " + (f"lognormal error σ {o.scale:.3g}" if o.noise == "lognormal"
                                                 else f"normal error sd {format_number(o.scale, 3)}"))
            obs.append([[C(n)], what, o.source or "none given"])
        sec.blocks.append(Table(["observed", "figure and noise", "source"], obs, src=frozenset({2}),
                                caption="What the run is conditioned on.", stack=True))
    if spec.architecture is not None:
        a = spec.architecture.__dict__
        sec.blocks.append(P(["Architecture: " + ", ".join(f"{k} {v:,}" for k, v in a.items() if v is not None) + "."]))
    return sec


# ---- 6. reproducibility -----------------------------------------------------------------------


def reproducibility(run) -> Section:
    s = run.summary
    sec = Section("reproducibility", "6. Reproducibility")
    post = s.get("posterior") if isinstance(s.get("posterior"), Mapping) else {}
    rows: list = [["seed", str(s.get("seed", "n/a"))],
                  ["samples", f"{s['samples']:,}" if isinstance(s.get("samples"), int) else "n/a"]]
    if post:
        rows.append(["posterior method", str(post.get("method", "n/a"))])
        if num(post.get("ess")):
            frac = f" ({100 * post['ess_fraction']:.1f}% of the draws)" if num(post.get("ess_fraction")) else ""
            rows.append(["effective sample size", f"{post['ess']:,.0f}{frac}"])
        k = post.get("pareto_k")
        if num(k):
            verdict = "reliable" if k < 0.5 else "usable" if k < 0.7 else "unreliable (above 0.7)"
            rows.append(["Pareto k-hat (PSIS, Vehtari et al. 2024)", f"{k:.2f}: {verdict}"])
        rhat = post.get("rhat", post.get("r_hat"))
        if isinstance(rhat, Mapping):
            rhat = max((v for v in rhat.values() if num(v)), default=None)
        if num(rhat):
            rows.append(["R-hat (largest)", f"{rhat:.3f}"])
        for k2 in ("chains", "draws", "warmup", "divergences"):
            if num(post.get(k2)) and not (k2 == "chains" and post[k2] == 1 and "rhat" not in post):
                rows.append([f"NUTS {k2}" if "rhat" in post else k2, f"{post[k2]:,.0f}"])
    else:
        rows.append(["posterior", "not computed"])
    for which, block in (("prior", s.get("prior") or {}), ("posterior", post)):
        g = stat(block, "gpu_hours")
        if g and num(g.get("mcse_p50")):
            rows.append([f"Monte Carlo error of the {which} median GPU-hours",
                         f"± {format_number(g['mcse_p50'], 2)} ({100 * g['mcse_p50'] / g['p50']:.2f}%)"])
    rows += [["device", str(s.get("device", "n/a"))], ["mcflops version", str(s.get("version", "n/a"))]]
    if isinstance(s.get("versions"), Mapping):
        rows += [[f"{k} version", str(v)] for k, v in s["versions"].items()]
    rows += [["spec hash", [C(str(s.get("spec_hash", "n/a")))]], ["FLOPs convention", str(s.get("flops_convention"))]]
    t = s.get("timings") or {}
    if num(t.get("total_s")):
        rows.append(["run time", f"{t['total_s']:.1f} s"])
    sec.blocks.append(Table(["", ""], rows))
    said = set(post.get("findings") or ()) if post else set()  # section 3 states those
    for note in s.get("notes") or []:
        if note not in said:
            sec.blocks.append(P([f"Note: {note}"], "note"))
    q = shlex.quote(run.label)
    cmds = [[C(f"mcflops run {q}/spec.resolved.yaml --out {q}")], [C(f"mcflops report {q}")]]
    if s.get("file"):
        cmds.insert(0, [C(f"mcflops run {shlex.quote(str(s['file']))}")])
    sec.blocks += [P(["To repeat the run exactly (same seed, samples and resolved priors), then re-render this "
                      "page from the saved files without sampling:"]), Items(cmds)]
    return sec
