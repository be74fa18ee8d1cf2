"""Comparison: how two models or checkpoints differ, tensor by tensor and rolled up."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from functools import partial
from types import MappingProxyType
from typing import Any

import pandas as pd

from .analyze import compare as _compare
from .analyze import structure
from .analyze.stats import stats
from .analyze.value_view import DELTA, ValueAccess
from .backends import ModelSource, as_source, on_receiving_rank, preorder
from .render.compare_text import comparison_text
from .render.display import DisplayFrame
from .render.json_export import jsonable
from .result import Result, input_paths
from .terminal import safe_lines, safe_text

__all__ = ["Comparison", "compare"]


class Comparison(Result):
    """The ``compare`` frame of two sources (one row per tensor: status, L2 of the delta,
    ``rel_change``, max |delta|, cosine, mean drift, fractions above thresholds) and its
    roll-ups. ``print()`` it for text; in a notebook it shows the tree coloured by change."""

    def __init__(
        self,
        name_a: str,
        name_b: str,
        frames: Mapping[str, pd.DataFrame],
        totals: Mapping[str, Any],
        thresholds: tuple[float, ...],
        framework: str = "torch",
        sources: tuple[ModelSource, ModelSource] | None = None,
        bins: int = 64,
        stats_a: pd.DataFrame | None = None,
        inputs: tuple[str, ...] = (),
    ):
        self.name_a, self.name_b = name_a, name_b
        self.sides = (name_a, name_b)
        self.name, self.framework = f"{name_a} -> {name_b}", framework
        self.frames = MappingProxyType(dict(frames))  # compare, and the shown tree's layers and params
        self.totals = MappingProxyType(dict(totals))  # of the shown tree
        self.thresholds = thresholds
        self._sources = sources  # read again, once, for the widget's before/after histograms
        self._bins = bins
        self._side_stats = {} if stats_a is None else {"stats_a": stats_a}
        self._rollups: dict[str, pd.DataFrame] = {}
        self.inputs = inputs
        self.values = (
            None
            if sources is None
            else ValueAccess(
                dict(zip(("a", "b"), sources)),
                {side: partial(self._side_stats_frame, f"stats_{side}") for side in ("a", "b")},
            )
        )

    def _side_stats_frame(self, key: str) -> pd.DataFrame:
        return self._widget_frames()[key]

    def locate(
        self,
        what: str | list[str],
        *,
        first: int = 10,
        side: str = DELTA,
        tensors: list[str] | None = None,
        k: float | None = None,
    ) -> pd.DataFrame:
        """Where the bad values are (schema.LOCATE) in Δ = b − a (`side` "delta", the tensors
        both sides hold with one shape) or in side "a" or "b"; see :meth:`Inspection.locate`."""
        if self.values is None:
            raise ValueError(f"{self.name}: no values to locate in (a comparison rebuilt without its sources)")
        if side not in (DELTA, "a", "b"):
            raise ValueError(f"side must be 'delta', 'a' or 'b', not {side!r}")
        frame = self.values.locate(what, first=first, side=side, tensors=tensors, k=k)
        shown = DisplayFrame(frame)
        shown.attrs["skipped"] = frame.attrs["skipped"]
        return shown

    def _value_access(self) -> ValueAccess | None:
        return self.values

    def _widget_frames(self) -> Mapping[str, pd.DataFrame]:
        """The frames plus each side's tensor statistics (the widget's before/after
        histograms), read once, when the widget is first shown: compare() itself stays one
        pass, and a side whose statistics were handed in is not read again."""
        if self._sources is not None:
            for key, source in zip(("stats_a", "stats_b"), self._sources):
                if key not in self._side_stats:
                    self._side_stats[key] = stats(source, bins=self._bins, by="tensor")
        rolled = {"compare_by_module": self._rolled("module"), "compare_by_component": self._rolled("component")}
        return {**self.frames, **self._side_stats, **rolled}

    def _rolled(self, by: str) -> pd.DataFrame:
        """A roll-up of the compare frame, computed on first use and kept: results compute
        nothing twice (``by``: module, component, layer_component, layer)."""
        if by not in self._rollups:
            frame = self.frames["compare"]
            if by == "module":
                self._rollups[by] = _compare.by_module(frame)
            elif by == "layer":
                self._rollups[by] = _compare.by_layer(frame)
            else:
                self._rollups[by] = _compare.by_component(frame, per_layer=by == "layer_component")
        return self._rollups[by]

    @property
    def frame(self) -> pd.DataFrame:
        """One row per tensor (schema.COMPARE)."""
        return DisplayFrame(self.frames["compare"])

    def by_module(self) -> pd.DataFrame:
        """Rolled up per module path, root ('') first (schema.COMPARE_GROUPS)."""
        return DisplayFrame(self._rolled("module"))

    def by_component(self, per_layer: bool = False) -> pd.DataFrame:
        """Rolled up per component (attn.q/k/v/o, mlp.gate/up/down, embedding, norm, ...),
        or per (layer, component) with ``per_layer=True``."""
        return DisplayFrame(self._rolled("layer_component" if per_layer else "component"))

    def by_layer(self) -> pd.DataFrame:
        """Rolled up per layer index read from the names."""
        return DisplayFrame(self._rolled("layer"))

    def summary(self, top: int = 10) -> str:
        """Text: status counts, overall and per-component change, the `top` most changed."""
        overall = self.by_module().head(1)
        text = comparison_text(self.name, self.frame, overall, self.by_component(), self.thresholds, top)
        return safe_lines(text)  # names from a file cannot drive a terminal

    def _saved_summary(self) -> str:
        return self.summary(top=5)

    def __repr__(self) -> str:
        counts = self.frame["status"].value_counts()
        return (
            f"<Comparison {safe_text(self.name_a)} -> {safe_text(self.name_b)}: "
            + ", ".join(f"{int(n)} {s}" for s, n in counts.items())
            + ">"
        )

    def to_dict(self) -> dict:
        """Plain Python: the thresholds, and the per-tensor, per-module and per-component rows."""
        return jsonable(
            {
                "a": self.name_a,
                "b": self.name_b,
                "thresholds": list(self.thresholds),
                "tensors": self.frame.to_dict("records"),
                "modules": self.by_module().to_dict("records"),
                "components": self.by_component().to_dict("records"),
            }
        )


@on_receiving_rank(0, 1)
def compare(
    a: Any,
    b: Any,
    thresholds: Iterable[float] = _compare.DEFAULT_THRESHOLDS,
    *,
    bins: int = 64,
    stats_a: pd.DataFrame | None = None,
) -> Comparison:
    """Compare two models, state_dicts or checkpoint paths (any mix) tensor by tensor.

    Tensors are matched by name; each row says whether it is the same, changed, has a
    changed dtype, was reshaped, added (only in b) or removed (only in a), with delta
    statistics computed chunk by chunk in float64. Neither input is changed.

    The widget's before/after histograms have `bins` bins; `stats_a`, a's tensor statistics
    with as many bins when they are at hand (``inspect(a, bins=bins).stats``), are used for
    them rather than reading a again."""
    if stats_a is not None:
        _check_stats_a(stats_a, bins)
    src_a, src_b = as_source(a), as_source(b)
    frame = _compare.compare_frame(src_a, src_b, thresholds)
    tree = _union(src_a, src_b)
    frames = {"compare": frame, "layers": structure.layers(tree), "params": structure.params(tree)}
    return Comparison(
        src_a.name,
        src_b.name,
        frames,
        structure.totals(tree),
        frame.attrs["thresholds"],
        src_a.framework,
        sources=(src_a, src_b),
        bins=bins,
        stats_a=stats_a,
        inputs=input_paths(a, b),
    )


def _check_stats_a(stats: pd.DataFrame, bins: int) -> None:
    """a's statistics must be per tensor and have `bins` bins, or the widget would lay a's
    histograms over b's with other bins, or look module roll-ups up as tensors."""
    sizes = {len(h) for h in stats["hist_counts"] if h is not None} if "hist_counts" in stats else {None}
    modules = "kind" in stats and bool((stats["kind"] == "module").any())
    if modules or sizes - {bins}:
        what = "module roll-ups" if modules else f"histograms of {sorted(sizes, key=str)} bins"
        raise ValueError(
            f"compare(stats_a=...) must be a's per-tensor statistics with {bins} bins "
            f"(inspect(a, bins={bins}).stats); got {what}"
        )


def _union(a: ModelSource, b: ModelSource) -> ModelSource:
    """a's module tree and tensors, plus the modules and tensors only b has, in pre-order
    (b's new children after a's), so every row of the comparison has a place in the tree."""
    names_a = {m.name for m in a.modules}
    if all(m.name in names_a for m in b.modules) and {t.name for t in b.tensors} <= {t.name for t in a.tensors}:
        return a
    entries = {m.name: m for m in b.modules} | {m.name: m for m in a.modules}  # a's entry wins

    def parent(path: str) -> str | None:  # the real parent, as the source that has the module knows it
        return (a if path in names_a else b).parent(path)

    order = [entries[p] for p in preorder((m.name for m in (*a.modules, *b.modules)), parent)]
    in_a = {t.name for t in a.tensors}
    tensors = (*a.tensors, *(t for t in b.tensors if t.name not in in_a))
    return replace(a, modules=tuple(order), tensors=tensors)
