"""Interval fits: the prior of a family whose 5% and 95% quantiles are given (``beta: [p5, p95]``). No JAX here.

The normal and lognormal intervals have closed forms (``mcflops.spec.grammar``); the beta needs a
solve, done here with scipy.special only.
"""

from __future__ import annotations

import math

from mcflops.priors.dist import Z95
from mcflops.diskcache import persistent


@persistent(keyed=2)  # err only words the error of a failed fit, and failures are not kept
def fit_beta_interval(p5: float, p95: float, err=None) -> dict[str, float]:
    """The beta whose 5% and 95% quantiles are p5 and p95.

    Levenberg-Marquardt (Nocedal & Wright 2006, "Numerical Optimization", Sec. 10.3) in t = (log a, log b)
    on relative residuals: log x_p(a, b) - log(target) for a target below 1/2, log(1 - x_p(a, b)) -
    log(1 - target) above it, where 1 - x_p(a, b) = x_{1-p}(b, a) (I_x(a, b) = 1 - I_{1-x}(b, a),
    Abramowitz & Stegun 26.5.2): no quantile loses digits next to 0 or 1. x_p by scipy.special.betaincinv;
    Jacobian by central differences, step 1e-5 in t (truncation and rounding errors ~1e-10 relative: the
    last steps, Newton's once mu is small, still converge to the last bits). Start: the beta with the
    moments of the normal of the same 90% interval. No scipy.optimize: slow to import, and the
    spec layer needs none.
    """
    import numpy as np
    from scipy.special import betaincinv

    side = np.array([p5 >= 0.5, p95 >= 0.5])  # which end each target is measured from
    target = np.log(np.where(side, 1.0 - np.array([p5, p95]), [p5, p95]))  # 1 - p is exact for p >= 1/2
    probs = np.array([0.05, 0.95])

    def resid(t):  # t: (..., 2) log-parameters -> (..., 2) residuals
        t = np.asarray(t, np.float64)
        a, b = np.exp(t[..., :1]), np.exp(t[..., 1:])
        with np.errstate(all="ignore"):
            x = np.where(side, betaincinv(b, a, 1.0 - probs), betaincinv(a, b, probs))
            return np.log(x) - target

    def size(r):
        return float(np.max(np.abs(r))) if np.all(np.isfinite(r)) else math.inf

    m, sd = (p5 + p95) / 2, (p95 - p5) / (2 * Z95)
    k = max(m * (1 - m) / sd / sd - 1, 0.5)  # beta moments: var = m(1-m)/(a+b+1)
    t = np.log([m * k, (1 - m) * k]) if math.isfinite(k) else np.zeros(2)
    r = resid(t)
    h, mu = 1e-5, 1e-3
    shifts = np.array([[h, 0.0], [-h, 0.0], [0.0, h], [0.0, -h]])
    for _ in range(500):
        rr = resid(t + shifts)
        jac = np.column_stack([(rr[0] - rr[1]) / (2 * h), (rr[2] - rr[3]) / (2 * h)])  # d r_i / d t_j
        if not np.all(np.isfinite(jac)):
            break
        jtj, grad = jac.T @ jac, jac.T @ r
        while mu < 1e12:
            try:
                step = np.linalg.solve(jtj + mu * np.diag(np.diag(jtj) + 1e-300), -grad)  # Marquardt's scaling
            except np.linalg.LinAlgError:
                step = np.full(2, np.nan)
            step *= min(1.0, 1.0 / np.max(np.abs(step)))  # at most a factor e in a or b per step
            r_new = resid(t + step)
            if np.all(np.isfinite(step)) and size(r_new) < size(r):
                break
            mu *= 4.0
        else:
            break  # no step lowers the residual: converged (or no beta fits)
        t, r, mu = t + step, r_new, max(mu / 8.0, 1e-12)
        if size(r) <= 2e-16 or (mu < 1e-6 and np.max(np.abs(step)) < 1e-13):  # Newton's regime: quadratic
            break
    a, b = (float(x) for x in np.exp(t))
    if not size(r) <= 1e-9:  # both quantiles to 1e-9 relative (of p or 1 - p, whichever is smaller)
        msg = f"no beta has 5% and 95% quantiles [{p5:g}, {p95:g}]"
        if err is None:
            raise ValueError(msg)
        raise err(msg)
    return {"a": a, "b": b}
