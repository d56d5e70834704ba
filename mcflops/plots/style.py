"""One look for every figure: colours for prior vs posterior, units, sizes legible at page width."""

from __future__ import annotations

PRIOR = "#8c9db5"  # muted blue-grey: what we believed before the data
POSTERIOR = "#c8553d"  # warm red: what the published figure implies
OBSERVED = "#222222"  # the published figure itself
ACCENT = "#2a9d8f"
WIDTH_IN = 7.0  # page width in inches; figures are made at this width and 150 dpi
DPI = 150


def figure(height: float = 3.6, ncols: int = 1, nrows: int = 1, **kw):
    """A matplotlib figure on the Agg backend with the house style."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 9.5, "axes.spines.top": False, "axes.spines.right": False,
                         "axes.titlesize": 10.5, "axes.titleweight": "bold", "legend.frameon": False})
    return plt.subplots(nrows, ncols, figsize=(WIDTH_IN, height), dpi=DPI, **kw)


def save(fig, path) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return str(path)


def millions(x: float, _pos=None) -> str:
    return f"{x / 1e6:.3g}M"
