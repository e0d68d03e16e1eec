"""Plots and the HTML report page from evidence tables."""
