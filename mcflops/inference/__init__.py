"""Conditioning on published figures: importance sampling from the engine's sums, PSIS, NUTS, summaries."""
