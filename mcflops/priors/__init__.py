"""What a prior is, host side (NumPy and scipy.special only): the Dist value, exact quantiles, interval fits,
quantile tables, and the recipes' formulas (Daly's goodput, the calibrated utilization)."""
