"""Figures (matplotlib), the only importers of it. Each function takes plain data (the dicts of
summary.json, or the densities and grids of inference.plotdata) and a path, draws one PNG and returns
the path; the statistics it shows come computed. matplotlib is imported inside the functions (Agg backend)."""
