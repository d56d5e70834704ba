"""The layout fit: the layout MFU model's efficiency priors (``mfu: {layout: ...}``) fitted to the layout-resolved
benchmark rows (mcflops/data/layout_runs.yaml), their held-out checks, and the fit that ships as
mcflops/data/layout_fit.json (read by :func:`mcflops.layout.load_fit`).

data.py: the rows, loaded and validated; mix.py: the rows as arrays, mixed over the settings a source leaves
out; fit.py: each row's terms and true MFU, the NumPyro model, its NUTS fit and predictions; validate.py: the
shipped priors, the held-out production rows and trends; results.py: what `mcflops calibrate --layout` returns,
computed in one place. Apart from the published-runs fit (mcflops.calibration): the two share no module.
"""
