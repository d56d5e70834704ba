"""What the report says in its headline, napkin chain, assumptions and reproducibility sections (what the
published figure implies is :mod:`mcflops.report.posterior`, what drives it :mod:`mcflops.report.drivers`).

Reads only the run's summary (summary.json), its resolved spec and the names of its figures; does no
statistics. A section whose inputs are missing says "not computed" instead of failing.
"""

from __future__ import annotations

import math
import shlex
from typing import Mapping

from mcflops import chain
from mcflops.numbers import format_number
from mcflops.spec import INPUTS
from mcflops.priors import calibrated
from mcflops.report.priors import words as prior_words
from mcflops.report.blocks import HEADLINE_FIGURE, IMPLIED, B, Box, C, Fig, Items, P, Section, Sub, Table, _accelerator, _and, _count, failed_checks, headline_caption, observes, fmt, interval, label, median_ci, missing, num, ordinal, posterior_warning, stat

# ---- headline ------------------------------------------------------------------------------------


def headline(run) -> Section:
    """The answer first: the posterior when the run is conditioned on a figure and its checks passed,
    else the prior predictive (a new run: the priors alone, said so)."""
    s = run.summary
    sec = Section("headline", "Headline")
    prior, post = s.get("prior") or {}, s.get("posterior") or {}
    failed = failed_checks(s)
    if failed:  # first, before any number
        sec.blocks.append(posterior_warning(failed))
    gh = stat(prior, "gpu_hours")
    if gh is None:
        sec.blocks.append(missing("summary.json has no prior-predictive GPU-hours"))
        return sec
    new_run = not observes(run)
    lead = post if stat(post, "gpu_hours") and not failed else prior
    if lead is post:
        g1 = post["gpu_hours"]
        box = [P([B(f"{fmt('gpu_hours', g1['p50'])} GPU-hours"), " is the median given the published figure "
                  f"(the posterior); 90% interval {interval('gpu_hours', g1.get('p5'), g1.get('p95'))}. Before "
                  f"the figure, the prior predictive said {median_ci('gpu_hours', gh)}."])]
    else:
        alone = " (the priors alone: the prior file observes nothing)" if new_run else ""
        box = [P([B(f"{fmt('gpu_hours', gh['p50'])} GPU-hours"), f" is the median of the prior predictive{alone}; "
                  f"90% interval {interval('gpu_hours', gh.get('p5'), gh.get('p95'))}."])]
    days, count = stat(lead, "wall_days"), _count(run)
    if days and count:
        box.append(P([f"On {count:,} {_accelerator(run)}: ", B(fmt("wall_days", days["p50"])),
                      f" of wall-clock time (90%: {interval('wall_days', days.get('p5'), days.get('p95'))})."]))
    extra = []
    if stat(lead, "cost"):
        extra += ["Cost at the price prior: ", B(fmt("cost", lead["cost"]["p50"])),
                  f" (90%: {interval('cost', lead['cost'].get('p5'), lead['cost'].get('p95'))}). "]
    if stat(lead, "energy_mwh"):
        e = lead["energy_mwh"]
        extra += ["Energy (accelerator power × PUE): ", B(fmt("energy_mwh", e["p50"])),
                  f" (90%: {interval('energy_mwh', e.get('p5'), e.get('p95'))})."]
    if extra:
        box.append(P(extra))
    for name, o in (s.get("observed") or {}).items():
        box.append(P(_observed_sentence(name, o)))
    m = stat(post, "mfu")
    if m and stat(prior, "mfu") and failed:
        box.append(P(["The posterior MFU is not stated here: the posterior failed its checks (see above)."]))
    elif m and stat(prior, "mfu"):
        what = "MFU × goodput (effective utilization)" if _calibrated_mfu(run) else "MFU"
        box.append(P([f"Given the published figure, the run-average {what} is ", B(fmt("mfu", m["p50"])),
                      f" (90%: {interval('mfu', m.get('p5'), m.get('p95'))}; prior "
                      f"{median_ci('mfu', prior['mfu'])}). See \u201c{IMPLIED}\u201d below."]))
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
    what = ("Prior: the priors alone (nothing observed)." if new_run else
            "Prior: before the published figure. Posterior: given it.")
    sec.blocks.append(Table(header, rows, num=frozenset(range(1, len(header))),
                            caption=f"Napkin: every input at its median. {what}"))
    if HEADLINE_FIGURE in run.figures:
        sec.blocks.append(Fig(HEADLINE_FIGURE, run.figures[HEADLINE_FIGURE], headline_caption(run)))
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


# ---- napkin chain --------------------------------------------------------------------------------


def _calibrated_mfu(run) -> bool:
    """The file's mfu prior is the calibrated one: effective utilization (MFU x goodput), its goodput 1."""
    return run.spec is not None and calibrated.describe(run.spec.priors.get("mfu")) is not None


def napkin(run) -> Section:
    s = run.summary
    sec = Section("napkin", "The napkin chain")
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
        known = chain.CONVENTIONS.get(conv)
        rule = known.rule if known is not None and known.rule else f"{conv} per token"
        flops = [f"FLOPs = {rule} × D = ", fmt("flops", ch.get("flops_per_token"), 4),
                 " × ", f4("tokens"), " = ", B(fmt("flops", ch["flops"], 4)), "."]
    # a calibrated mfu prior is effective utilization (MFU x goodput, its goodput 1): say so in the chain
    u = "MFU × goodput (calibrated)" if _calibrated_mfu(run) else "MFU"
    steps = [flops, [f"GPU-hours = FLOPs / (peak × {u} × goodput) / 3600 = ", fmt("flops", ch["flops"], 4), " / (",
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
                   Items(steps, ordered=True), *_left_out(run, conv), Sub("Why the Monte Carlo answer differs"),
                   *_why(run, ch)]
    return sec


def _left_out(run, conv: str) -> list:
    """What 6N per token leaves out, from the architecture's count (summary.json "architecture"): 3 x the
    forward FLOPs (Narayanan et al. 2021, App.: backward is twice the forward), causal attention scores
    included, at the file's sequence length."""
    a = run.summary.get("architecture") or {}
    train, six_n = a.get("training_flops_per_token"), a.get("six_n")
    if conv != "6nd" or not (num(train) and num(six_n)) or train <= 0:
        return []
    comp = a.get("components") or {}
    scores = comp.get("attention_scores_causal")
    arch = getattr(run.spec, "architecture", None) if run.spec else None
    at = f" at sequence length {arch.seq_len:,}" if arch is not None and getattr(arch, "seq_len", None) else ""
    share = (f"; the attention scores are {100 * scores / a['flops_per_token']:.1f}% of the forward count"
             if num(scores) and num(a.get("flops_per_token")) and a["flops_per_token"] > 0 else "")
    rel = 100 * (six_n / train - 1)
    return [P([f"What 6N leaves out: the architecture counts {format_number(train, 4)} FLOPs per training token"
               f"{at} (3 × forward, causal attention included{share}); 6N = {format_number(six_n, 4)} is "
               f"{abs(rel):.1f}% {'below' if rel < 0 else 'above'} it."])]


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


# ---- assumptions ---------------------------------------------------------------------------------


def assumptions(run) -> Section:
    sec = Section("assumptions", "Assumptions")
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
        # a derived prior (a recipe's, the calibrated one) by its quantiles and its recipe, not its mixture
        meaning = calibrated.LABEL if calibrated.describe(d) else INPUTS.get(name, ("", "", "", ""))[3]
        rows.append([[C(name)], meaning, prior_words(name, d, spec), ci, d.source or "none given"])
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
    # the defaults the file relies on, the priors that look like mistakes (mcflops.spec.notes), then the run's
    # notes no other section states: each note once in the document (report.once drops a later copy)
    post = run.summary.get("posterior") if isinstance(run.summary.get("posterior"), Mapping) else {}
    said = set(post.get("findings") or ())  # the posterior's findings: its section states them in its own words
    notes = list(dict.fromkeys([*spec.notes, *(str(n) for n in run.summary.get("notes") or () if n not in said)]))
    if notes:
        sec.blocks += [P(["Notes: what the prior file leaves to the defaults, what the run assumed, and what to "
                          "check:"]), Items([[n] for n in notes], notes=True)]
    if spec.architecture is not None:
        a = spec.architecture.__dict__  # widths and counts (integers), a preset or config path, flags

        def shown(v):
            return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v).lower() \
                if isinstance(v, bool) else str(v)

        sec.blocks.append(P(["Architecture: " + ", ".join(f"{k} {shown(v)}" for k, v in a.items()
                                                          if v is not None and k != "source") + "."]))
    return sec


# ---- reproducibility -----------------------------------------------------------------------------


def reproducibility(run) -> Section:
    s = run.summary
    sec = Section("reproducibility", "Reproducibility")
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
            n = s.get("samples") if isinstance(s.get("samples"), int) else 0
            # min(1 - 1/log10 S, 0.7): Vehtari et al. 2024, Sec. 3.2 (inference.psis.khat_threshold, not
            # imported: that package brings JAX, and the report renders without it)
            thr = min(1.0 - 1.0 / math.log10(n), 0.7) if n > 10 else 0.7
            verdict = "reliable" if k <= thr else "unreliable: do not quote the posterior"
            rows.append([f"importance-sampling reliability (Pareto k-hat of the weights, PSIS; reliable up to "
                         f"{thr:.2f}, Vehtari et al. 2024)", f"{verdict} (k-hat {k:.2f})"])
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
        rows += [[f"{k} version", str(v)] for k, v in s["versions"].items() if k != "mcflops"]
    rows += [["spec hash", [C(str(s.get("spec_hash", "n/a")))]], ["FLOPs convention", str(s.get("flops_convention"))]]
    t = s.get("timings") or {}
    if num(t.get("total_s")):
        rows.append(["run time", f"{t['total_s']:.1f} s"])
    sec.blocks.append(Table(["", ""], rows))
    if run.spec is None:  # the assumptions section has no spec to list, so the run's notes are stated here
        notes = [n for n in s.get("notes") or [] if n not in set(post.get("findings") or ())]
        sec.blocks += [P([f"Note: {n}"], "note") for n in notes]
    q = shlex.quote(run.label)
    cmds = [[C(f"mcflops run {q}/spec.resolved.yaml --out {q}")], [C(f"mcflops report {q}")]]
    if s.get("file"):
        cmds.insert(0, [C(f"mcflops run {shlex.quote(str(s['file']))}")])
    sec.blocks += [P(["To repeat the run exactly (same seed, samples and resolved priors), then re-render this "
                      "page from the saved files without sampling:"]), Items(cmds)]
    return sec
