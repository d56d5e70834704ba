"""The comparison report: Markdown and one self-contained HTML page from a ``compare --out`` folder.

Computation-free, like the run report: everything comes from ``compare.json`` and the figure
(``compare.png``) in the folder; the markup and its escaping are :mod:`mcflops.report.markup`'s.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Mapping

from mcflops.report.blocks import B, Box, C, Document, Fig, Items, P, Section, Table, fmt, label, num
from mcflops.report.markup import to_html, to_markdown

DATA = "compare.json"
FIGURE = "compare.png"
SCENARIOS_FIGURE = "scenarios.png"
_PNG = b"\x89PNG\r\n\x1a\n"
_DRAWS = {"shared": "shared (the same draws)", "coupled": "coupled", "independent": "independent",
          "fixed": "fixed (a point value)", "ratio to A": "ratio to A (A's draw times the ratio's)"}


def render(folder: str | Path) -> dict[str, str]:
    """{"report.md": ..., "report.html": ...} for the comparison in ``folder`` (nothing is written)."""
    from mcflops import reading

    folder = Path(folder)
    data = reading.read_json(folder / DATA, str(folder / DATA), kind=f"a {DATA} mcflops wrote",
                             limit=reading.SUMMARY_BYTES, why="a comparison is tens of KB")
    fig = folder / FIGURE
    png = fig.read_bytes() if fig.is_file() else b""
    both = folder / SCENARIOS_FIGURE
    spng = both.read_bytes() if both.is_file() else b""
    ok = lambda b: b if b.startswith(_PNG) and len(b) > 24 else None  # noqa: E731 - a PNG's signature and header
    doc = build(data, ok(png), ok(spng))
    return {"report.md": to_markdown(doc), "report.html": to_html(doc)}


def _r(x: Any) -> str:
    return f"{x:.3g}" if num(x) else "n/a"


def build(d: Mapping[str, Any], png: bytes | None = None, scenarios_png: bytes | None = None) -> Document:
    from mcflops.report.scenarios import section

    out, a, b, r = d.get("output", "gpu_hours"), d.get("a") or {}, d.get("b") or {}, d.get("ratio") or {}
    sc = section(d, scenarios_png, SCENARIOS_FIGURE) if d.get("scenarios") else None
    if "ratio" not in d and sc is not None:  # three or more scenarios: the table is the headline
        rows = d["scenarios"]["table"]
        post = d.get("distribution") == "posterior"
        meta = f"seed {d.get('seed', '?')} · {d.get('samples', 0):,} draws · {'posteriors' if post else 'priors'}"
        return Document(f"{len(rows)} scenarios side by side, each against {rows[0].get('name')}",
                        ", ".join(f"{e['tag']} = {e['name']} ({e['path']})" for e in rows), meta,
                        [sc, _notes(d, "2. Notes"), _reproduce(d, "3. Reproduce")])
    post = d.get("distribution") == "posterior"
    meta = f"seed {d.get('seed', '?')} · {d.get('samples', 0):,} draws · {'posteriors' if post else 'priors'}"
    title = f"{b.get('name', 'B')} against {a.get('name', 'A')}: {label(out)}"
    return Document(title, f"B = {b.get('name')} ({b.get('path')}), A = {a.get('name')} ({a.get('path')})", meta,
                    [_headline(d, out, a, b, r, post, png, 3 if sc else 2), *([sc] if sc is not None else []),
                     _inputs(d, 3 if sc else 2), _notes(d, f"{4 if sc else 3}. Notes"),
                     _reproduce(d, f"{5 if sc else 4}. Reproduce")])


def _headline(d, out, a, b, r, post, png, inputs: int = 2) -> Section:
    sec = Section("ratio", "1. B / A")
    which = "posterior" if post else "prior"
    if num(r.get("min")) and r.get("min") == r.get("max"):
        box = [P([B(f"B / A = {r['p50']:.4g}"), " for every draw: the files differ only by a constant factor."])]
    else:
        box = [P([B(f"B / A: median ×{_r(r.get('p50'))}"), f" (90% interval {_r(r.get('p5'))} to {_r(r.get('p95'))}) "
                  f"under the {which}s; P(B < A) = {_r(r.get('prob_b_less'))}, "
                  f"P(B > A) = {_r(r.get('prob_b_greater'))}."])]
    coupled = d.get("coupled_inputs") or {}
    box.append(P([f"Shared draws: {', '.join(d.get('shared_inputs') or []) or 'none'}; coupled: "
                  f"{', '.join(f'{k} (rank correlation {v:g})' for k, v in coupled.items()) or 'none'}; "
                  f"independent: {', '.join(d.get('independent_inputs') or []) or 'none'}"
                  + "".join(f"; ratio to A: {k} (x {v})" for k, v in (d.get("ratio_inputs") or {}).items())
                  + f" (section {inputs})."]))
    if post and num(d.get("ess")):
        box.append(P([f"Weighted by the files' observations ({_observed(d)}); effective sample size "
                      f"{d['ess']:,.0f}."]))
    sec.blocks.append(Box(box))
    names = ("p5", "p25", "p50", "p75", "p95")
    rows = [[f"A: {a.get('name')}", *(fmt(out, a.get(k)) for k in names)],
            [f"B: {b.get('name')}", *(fmt(out, b.get(k)) for k in names)],
            ["B / A", *(_r(r.get(k)) for k in names)]]
    sec.blocks.append(Table(["", *names], rows, num=frozenset(range(1, 6)),
                            caption=f"{label(out)} quantiles; B / A's are quantiles of the ratio draw by draw, not "
                            "ratios of the quantiles."))
    if png is not None:
        sec.blocks.append(Fig(FIGURE, png, f"The distribution of B / A over the paired draws ({FIGURE})"))
    return sec


def _observed(d) -> str:
    obs = d.get("observed") or {}
    return "; ".join(f"{k.upper()}: {', '.join(v)}" for k, v in obs.items()) or "none"


def _inputs(d, number: int = 2) -> Section:
    sec = Section("inputs", f"{number}. How each input is drawn")
    sec.blocks.append(P(["An input whose prior is the same distribution in both files is ", B("shared"),
                         ": B takes A's draw, so it cancels from B / A. One whose priors differ is drawn ",
                         B("independently"), " unless a rank correlation was set (", C("--couple mfu=0.7"),
                         " or B's ", C("compare: {couple: {mfu: 0.7}}"), "): then it is ", B("coupled"),
                         " by a Gaussian copula with that Spearman correlation. An input B writes as ",
                         C("{relative_to: A.yaml, ratio: <prior>}"), " is A's draw times an independent ratio draw ",
                         "(", B("ratio to A"), "): B / A for it is the ratio prior. Which one fits is a modelling "
                         "choice: coupling makes B / A narrower when the two inputs really move together."]))
    from mcflops.report.priors import summarized

    # a fixed value in its unit and a derived prior by its quantiles (analysis.scenarios' summaries), not as text
    summ = {e.get("name"): e.get("summary") or [None, None] for e in (d.get("scenarios") or {}).get("inputs") or ()}
    rows = []
    for row in d.get("inputs") or []:
        rho, name = row.get("spearman"), str(row.get("name"))
        sa, sb = (summ.get(name) or [None, None])[:2]
        rows.append([label(name), summarized(name, sa, row.get("a")), summarized(name, sb, row.get("b")),
                     _DRAWS.get(row.get("draws"), str(row.get("draws"))), f"{rho:g}" if num(rho) else "–"])
    sec.blocks.append(Table(["input", "A", "B", "draws", "rank correlation"], rows, num=frozenset({4}),
                            src=frozenset({1, 2}), stack=True))
    return sec


def _notes(d, title: str = "3. Notes") -> Section:
    sec = Section("notes", title)
    notes = d.get("notes") or []
    sec.blocks.append(Items([[str(n)] for n in notes]) if notes else P(["None."]))
    return sec


def command(d: Mapping[str, Any]) -> str:
    """The command line that repeats this comparison."""
    paths = ([str(e.get("path")) for e in d["scenarios"]["table"]] if d.get("scenarios")
             else [str((d.get(t) or {}).get("path")) for t in ("a", "b")])
    words = ["mcflops", "compare", *paths, "--seed", str(d.get("seed")), "--samples", str(d.get("samples"))]
    if d.get("output", "gpu_hours") != "gpu_hours":
        words += ["--output", str(d["output"])]
    for k, v in (d.get("coupled_inputs") or {}).items():
        words += ["--couple", f"{k}={v:g}"]
    if d.get("distribution") == "posterior":
        words.append("--posterior")
    dl = (d.get("scenarios") or {}).get("deadline") or {}
    if dl.get("from") == "--deadline-days":
        words += ["--deadline-days", f"{dl['days']:g}", "--prob", f"{dl['prob']:g}"]
    return shlex.join(words)


def _reproduce(d, title: str = "4. Reproduce") -> Section:
    return Section("reproduce", title, [P(["Every number here comes again from ", C(command(d)), "."])])
