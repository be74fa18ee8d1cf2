"""Frames the widget tests feed in where other analyzers' frames are not under test:
a per-tensor stats frame with the documented columns, computed plainly with numpy."""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

STATS_COLUMNS = ["name", "numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf", "hist_counts", "hist_edges"]


def stats_row(name: str, values: np.ndarray, bins: int = 64) -> dict:
    v = values.astype(np.float64).ravel()
    finite = v[np.isfinite(v)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    counts, edges = np.histogram(finite, bins=bins, range=(lo, hi) if hi > lo else (lo - 0.5, lo + 0.5))
    return {
        "name": name,
        "numel": int(v.size),
        "mean": float(v.mean()) if v.size else np.nan,
        "std": float(v.std()) if v.size else np.nan,
        "min": float(v.min()) if v.size else np.nan,
        "max": float(v.max()) if v.size else np.nan,
        "abs_mean": float(np.abs(v).mean()) if v.size else np.nan,
        "l2": float(np.sqrt((v * v).sum())),
        "zeros": int((v == 0).sum()),
        "nan": int(np.isnan(v).sum()),
        "inf": int(np.isinf(v).sum()),
        "hist_counts": counts.tolist(),
        "hist_edges": edges.tolist(),
    }


def stats_frame(model: torch.nn.Module, bins: int = 64) -> pd.DataFrame:
    rows = [stats_row(n, t.detach().float().numpy(), bins) for n, t in model.state_dict(keep_vars=True).items()]
    return pd.DataFrame(rows, columns=STATS_COLUMNS)
