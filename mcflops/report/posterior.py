"""The report's section on what the published figure implies (the posterior against the prior, the prior
file's reported claims, the MFU-goodput ridge, a sentence a reviewer can quote).

Reads only the run's summary (summary.json), its resolved spec and the names of its figures; does no
statistics. A new run (nothing observed) has no such section; with an observation but no posterior it says
"not computed" instead of failing.
"""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.report.blocks import IMPLIED, _POST, _SENS, B, C, P, Section, Sub, Table, _fig_blocks, _figs, failed_checks, fmt, interval, label, median_ci, missing, num, posterior_warning, stat
from mcflops.spec import OUTPUTS

# ---- what the published figure implies -----------------------------------------------------


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
    sec = Section("implied", IMPLIED)
    prior, post = s.get("prior") or {}, s.get("posterior")
    if not isinstance(post, Mapping) or not post:
        if s.get("observed"):
            sec.blocks.append(missing("no posterior: summary.json has none"))
        else:
            sec.blocks.append(missing("no posterior: the prior file observes nothing (add an ", C("observe:"),
                                      " block with the published figure)"))
        return sec
    failed = failed_checks(s)
    if failed:
        sec.blocks.append(posterior_warning(failed))
    m0, m1 = stat(prior, "mfu"), stat(post, "mfu")
    if m0 and m1:
        from mcflops.priors.calibrated import describe

        # a calibrated mfu prior is effective utilization (MFU x goodput), and the sentence says so
        what = "MFU × goodput (effective utilization)" if run.spec is not None and \
            describe(run.spec.priors.get("mfu")) is not None else "MFU"
        sec.blocks.append(P([f"Posterior {what} ", B(median_ci("mfu", m1)), " against the prior ", median_ci("mfu", m0),
                             "."]))
    for path, r in _ranges(post.get("reported")):  # the prior file's `reported:` claims, one paragraph each
        name = str(path[0]) if path else "the quantity"
        where = interval(name, r["low"], r["high"])
        text = [f"Posterior probability that {label(name)} lies in the paper's {where}: ", B(f"{r['probability']:.2f}")]
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
    if q and failed:  # withheld: a failed posterior is not a sentence to quote
        sec.blocks += [Sub("A sentence a reviewer can quote"),
                       P(["None: the posterior failed its checks, so no sentence is offered."], "missing")]
    elif q:
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
    conv = {"6nd": "6ND", "palm": "PaLM (6N + attention)", "megatron": "Megatron",
            "architecture": "the architecture's count"}.get(s.get("flops_convention"), "")
    peak = stat(prior, "peak_flops")
    hw = f" against the dense peak of {fmt('peak_flops', peak['p50'])}" if peak and peak["p5"] == peak["p95"] else ""
    text = (f"Conditioning the priors for {s.get('name')} on the published {what} puts the run-average MFU "
            f"({conv} FLOPs{hw}) at {median_ci('mfu', m1)}, against a prior of {median_ci('mfu', m0)}.")
    corr = post.get("corr_mfu_goodput_log")
    if num(corr) and corr < -0.2 and stat(post, "goodput"):
        text += (f" The figure measures MFU × goodput, not each: with goodput "
                 f"{median_ci('goodput', post['goodput'])}, the two trade off (log correlation {corr:+.2f}).")
    return text
