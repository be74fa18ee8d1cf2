"""Renderers: text, JSON, plots and HTML made from frames, never from the model."""
