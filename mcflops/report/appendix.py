"""The report's appendix: every variance table summary.json holds (Sobol indices and Shapley effects, of the
log output and of the output itself; the correlations of each input with the output) and the Sobol figure.
The body's "what drives it" states one share per input; a reviewer who wants the rest finds it here.

Reads only summary.json's "sensitivity" and the figures; does no statistics beyond clipping an estimate
that strayed past [0, 1] by its Monte Carlo error.
"""

from __future__ import annotations

from typing import Any, Mapping

from mcflops.report.blocks import B, P, Section, Sub, Table, _fig_blocks, label, num


def _clip(x: float) -> float:
    """A variance share in [0, 1]: an estimate past either end is that end plus Monte Carlo error."""
    return min(max(float(x), 0.0), 1.0)


def appendix(run) -> Section | None:
    """The section, or None when summary.json has no variance table to show."""
    sens = run.summary.get("sensitivity")
    if not isinstance(sens, Mapping):
        return None
    out = str(sens.get("output") or "gpu_hours")
    blocks: list = []
    info = sens.get("sobol_info") if isinstance(sens.get("sobol_info"), Mapping) else {}
    sobol: list = []
    for key, scale in (("sobol", f"log {label(out)}"), ("sobol_linear", label(out))):
        for path, recs in _sobol_records(sens.get(key)):
            sobol += _sobol_table(run, " / ".join((scale, *path)), recs, info)
    if sobol:
        blocks += [Sub("Sobol indices"), *sobol]
    blocks += _fig_blocks(run, [n for n in run.figures if "sobol" in n.lower()])
    blocks += _shapley(out, sens)
    corr = sens.get("correlations")
    if isinstance(corr, Mapping) and any(isinstance(v, Mapping) for v in corr.values()):
        blocks += [Sub("Correlations"), *_correlations(out, corr)]
    blocks += [P([f"Note: {note}"], "note") for note in sens.get("notes") or ()]  # the analysis's caveats
    if not blocks:
        return None
    lead = P(["The variance tables behind the shares in \u201cWhat drives it\u201d: the same analysis, each "
              "estimator in full, with its Monte Carlo standard error (± s.e.)."])
    return Section("appendix", "Appendix: every variance table", [lead, *blocks])


def _shapley(out: str, sens: Mapping) -> list:
    """Shapley effects (Owen 2014): each input's share of the output's variance, defined with correlated
    inputs too (where Sobol indices are not); they add up to 1."""
    info = sens.get("shapley_info") if isinstance(sens.get("shapley_info"), Mapping) else {}
    blocks: list = []
    for key, scale in (("shapley", f"log {label(out)}"), ("shapley_linear", label(out))):
        recs = sens.get(key)
        if not isinstance(recs, Mapping):
            continue
        recs = {k: v for k, v in recs.items() if isinstance(v, Mapping) and num(v.get("effect"))}
        if not recs:
            continue
        order = sorted(recs, key=lambda k: -recs[k]["effect"])
        rows = [[label(k), f"{_clip(recs[k]['effect']):.3f}" + (f" ± {recs[k]['se']:.3f}" if num(recs[k].get("se"))
                                                               else "")] for k in order]
        if not blocks:
            blocks.append(Sub("Shapley effects"))
            corr = " (the inputs are correlated: these shares account for it)" if info.get("correlated") else ""
            blocks.append(P([B(label(order[0])), f" carries the largest share of the variance of {scale}: "
                             f"{_clip(recs[order[0]]['effect']):.2f}{corr}. Shapley effects split the variance "
                             "among the inputs, interactions and dependence shared fairly, and add up to 1."]))
        first = len(blocks) == 2  # the estimator is named under the first table only
        blocks.append(Table(["input", "Shapley effect (± s.e.)"], rows, num=frozenset({1}),
                            caption=f"Shapley effects of {scale}" + (f" ({info['estimator']})" if first and
                                                                     info.get("estimator") else "") + "."))
    return blocks


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
        return f"{_clip(r[k]):.3f} ± {se:.3f}" if num(se) else f"{_clip(r[k]):.3f}"

    top = recs[order[0]]
    first_sum = sum(_clip(r["first"]) for r in recs.values())
    if len(recs) == 1:  # one uncertain input explains all of the variance: its index is 1 up to Monte Carlo error
        lead = [f"{where}: ", B(label(order[0])), " is the only uncertain input: it explains all of the variance "
                "(the indices below are 1 up to their Monte Carlo error, clipped to 1)."]
    else:
        lead = [f"{where}: ", B(label(order[0])), f" explains the most: first-order index {_clip(top['first']):.2f}, "
                f"total {_clip(top['total']):.2f} (1 = all of the variance). The first-order indices add up to "
                f"{first_sum:.2f}" + (": the output is close to additive in these inputs." if abs(first_sum - 1) < 0.05
                                      else ": interactions carry the rest.")]
    out = [P(lead),
           Table(["input", "first-order (± s.e.)", "total (± s.e.)"], [[label(k), pm(recs[k], "first"),
                 pm(recs[k], "total")] for k in order], num=frozenset({1, 2}),
                 caption=f"Sobol indices of {where}" + (f" ({info['estimators']}; {info.get('base_samples', '?')} "
                                                        "base draws)" if info.get("estimators") else "") + ".")]
    if "posterior" in where.lower() or (run.spec is not None and run.spec.correlations):
        out.append(P(["Caution: Sobol indices assume independent inputs; these inputs are correlated "
                      "(a copula, or the posterior's MFU-goodput ridge), so read the indices as rough."], "note"))
    return out
