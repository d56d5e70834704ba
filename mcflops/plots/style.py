"""One look for every figure: colours for prior vs posterior, units, sizes legible at page width.

Figures are drawn through ``matplotlib.figure.Figure`` on an Agg canvas, without pyplot (no backend
switch, no figure manager, nothing to close). Each PNG carries the run's spec hash in its metadata
(``provenance``), so that a figure can be traced to the run that drew it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

from mcflops._version import version

PRIOR = "#8c9db5"  # muted blue-grey: what we believed before the data
POSTERIOR = "#c8553d"  # warm red: what the published figure implies
OBSERVED = "#222222"  # the published figure itself
ACCENT = "#2a9d8f"
WIDTH_IN = 7.0  # page width in inches; figures are made at this width and 150 dpi
DPI = 150
PNG_COMPRESS = 3  # zlib level (savefig's is 6): with RGB instead of RGBA, faster to encode and smaller
SPEC_KEY = "mcflops spec"  # PNG text chunk holding the run's spec hash (Spec.digest())
VERSION_KEY = "mcflops version"
RC = {"font.size": 9.5, "axes.spines.top": False, "axes.spines.right": False,
      "axes.titlesize": 10.5, "axes.titleweight": "bold", "legend.frameon": False}

# PNG text chunks save() adds, set by provenance(): a context variable, not a module dict, so that figures
# drawn in another thread or context (api.run's sensitivity beside the main pass) never take this one's stamp
_STAMP: contextvars.ContextVar[dict[str, str]] = contextvars.ContextVar("mcflops_png_stamp", default={})


@contextlib.contextmanager
def provenance(spec_hash: str | None) -> Iterator[None]:
    """Within the block (in this thread and context), every figure saved records ``spec_hash`` and the mcflops
    version in its PNG metadata (text chunks SPEC_KEY and VERSION_KEY)."""
    token = _STAMP.set({**_STAMP.get(), SPEC_KEY: str(spec_hash), VERSION_KEY: version()} if spec_hash
                       else _STAMP.get())
    try:
        yield
    finally:
        _STAMP.reset(token)


def figure(height: float = 3.6, ncols: int = 1, nrows: int = 1, **kw):
    """A matplotlib Figure on an Agg canvas with the house style; returns (figure, axes) as plt.subplots."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    matplotlib.rcParams.update(RC)
    fig = Figure(figsize=(WIDTH_IN, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kw)


def save(fig, path) -> str:
    """Tight layout, one draw, then the PNG at ``path`` (its metadata: the spec hash, see provenance)."""
    pinned = _watch_best_legends(fig)
    fig.tight_layout()
    for leg in pinned:  # score "best" once more, at the final layout, then pin the winner
        pinned[leg] = None
        leg.get_window_extent(fig.canvas.get_renderer())
    for leg, code in pinned.items():
        if code:
            leg.set_loc(code)
        leg.__dict__.pop("_find_best_position", None)
    fig.canvas.draw()
    _write_png(fig, path, dict(_STAMP.get()))
    return str(path)


def _write_png(fig, path, meta: dict[str, str]) -> None:
    """The drawn canvas as PNG, as savefig(path, dpi=DPI) writes it (same pixels, Software text and pHYs
    chunks) but without the alpha channel when every pixel is opaque (the house style's white figure):
    a quarter less to compress, and zlib level PNG_COMPRESS instead of 6."""
    import matplotlib
    import numpy as np
    from PIL import Image, PngImagePlugin

    rgba = np.asarray(fig.canvas.buffer_rgba())
    img = Image.fromarray(np.ascontiguousarray(rgba[..., :3]) if (rgba[..., 3] == 255).all() else rgba.copy())
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    for k, v in meta.items():
        info.add_text(k, v)
    img.save(path, format="png", pnginfo=info, dpi=(DPI, DPI), compress_level=PNG_COMPRESS)


def _watch_best_legends(fig) -> dict:
    """Legends at loc="best" score 9 positions against every plotted point, 4 times in a savefig
    (slow for the ridge's thousands of points). Record the position each scoring picks, so that save()
    can score once at the final layout and pin the winner (Legend.set_loc) for the draw: the same
    place. Uses matplotlib internals (Legend._find_best_position, _get_anchored_bbox); when they
    change, the legend stays at "best"."""
    from matplotlib.legend import Legend
    from matplotlib.transforms import Bbox

    picked: dict = {}
    for ax in fig.axes:
        leg = ax.get_legend()
        find = getattr(leg, "_find_best_position", None)
        if leg is None or getattr(leg, "_loc", None) != 0 or find is None or not hasattr(leg, "_get_anchored_bbox"):
            continue
        picked[leg] = None

        def record(width, height, renderer, leg=leg, find=find):
            x, y = find(width, height, renderer)
            box = Bbox.from_bounds(0, 0, width, height)
            for code in range(1, len(Legend.codes)):  # the codes _find_best_position tries, in its order
                cx, cy = leg._get_anchored_bbox(code, box, leg.get_bbox_to_anchor(), renderer)
                if abs(cx - x) < 1e-6 and abs(cy - y) < 1e-6:
                    picked[leg] = code
                    break
            return x, y

        leg._find_best_position = record
    return picked


def millions(x: float, _pos=None) -> str:
    return f"{x / 1e6:.3g}M"



def wrap(text: str, size: float | None = None, share: float = 1.0) -> str:
    """``text`` broken into lines that fit ``share`` of the figure's width at font ``size`` (default: the
    house font), so that a long label is never cut at the figure's edge: between its "; "-separated parts
    where they fit, else between words. A character of the sans-serif fonts is about 0.55 em wide on
    average; 0.6 leaves a margin."""
    import textwrap

    size = size or RC["font.size"]
    chars = max(20, int(share * WIDTH_IN * 72 / (0.6 * size)))
    lines: list[str] = []
    for para in text.split("\n"):
        line = ""
        for part in para.split("; "):
            joined = f"{line}; {part}" if line else part
            if len(joined) <= chars:
                line = joined
                continue
            if line:
                lines.append(line + ";")
            pieces = textwrap.wrap(part, chars, break_on_hyphens=False) or [""]
            lines += pieces[:-1]
            line = pieces[-1]
        lines.append(line)
    return "\n".join(lines)


def fitted_limits(lo: float, hi: float, pad: float = 0.04, log: bool = False) -> tuple[float, float]:
    """Axis limits that hold [lo, hi] with ``pad`` of the span on each side (of the log span when ``log``);
    a point gets +-5% around it."""
    import math

    if log:
        a, b = math.log(lo), math.log(hi)
        d = (b - a) * pad if b > a else 0.05
        return math.exp(a - d), math.exp(b + d)
    d = (hi - lo) * pad if hi > lo else max(abs(lo) * 0.05, 1e-12)
    return lo - d, hi + d
