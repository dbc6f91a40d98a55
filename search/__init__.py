"""Grids, budgets, the paper's protocol and running them on Ray Tune."""
