"""Figures (matplotlib/ArviZ), the only importers of them. Each function takes plain data and a
path, draws one PNG and returns the path. Import matplotlib inside the functions (Agg backend)."""
