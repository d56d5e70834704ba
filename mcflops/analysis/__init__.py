"""What drives the estimate (tornado, sweeps, Sobol, Shapley) and planning (deadlines, budgets, comparisons)."""
