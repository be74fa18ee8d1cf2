"""Analyzers: pure functions from a model (or source) to DataFrames."""
