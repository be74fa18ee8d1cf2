"""Inspection: the frames of one model, and the ways it shows itself."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from . import pipeline
from .analyze.fold import Folds, fold_repeats
from .analyze.health import HealthThresholds, health_frame, problem_counts, problem_tensors
from .analyze.stats import stats_frames
from .analyze.value_view import ValueAccess
from .analyze.views import ViewData, view_data
from .backends import backend_named, is_engine, on_receiving_rank
from .core.gc_pause import gc_paused
from .core.inputs import split_input
from .core.trace import TraceResult
from .errors import TraceError
from .render import json_export, text
from .render.checkpoint_text import metadata_text, tensor_listing
from .render.display import DisplayFrame
from .render.engine_text import engine_label, engine_text
from .render.flow import TextFrame, flow_text, memory_html, memory_text
from .render.model_info_json import model_info_dict
from .render.plots import distribution_figure
from .result import Result, input_paths
from .terminal import safe_lines, safe_text

__all__ = [
    "Inspection",
    "health",
    "inspect",
    "locate",
    "memory",
    "plot_distributions",
    "trace",
    "value_grid",
    "with_memory",
]

_I = TypeVar("_I", bound="Inspection")  # a copy keeps its class (mlx.ModelSummary stays one)


@dataclasses.dataclass(eq=False, repr=False)
class Inspection(Result):
    """What nbinspect found in one model: DataFrames (``params``, ``layers``, ``by_type``, ...)
    and ``totals``. ``print()`` it for a text summary; export it with :meth:`to_json`.
    ``dataclasses.replace(insp, frames=...)`` makes a copy with some fields changed (of the
    same class; the frames are shared, not copied)."""

    name: str
    framework: str
    frames: Mapping[str, pd.DataFrame]
    totals: Mapping[str, Any]
    io: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # what a checkpoint file held besides weights (epoch, optimizer, load report)
    metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    inputs: tuple[str, ...] = ()  # the files it was read from (never an export's target)
    # the values behind the frames (the widget's value view, locate); None for an engine
    values: ValueAccess | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        # read-only views of copies: the caller's dicts may change later, this Inspection does not
        self.frames = MappingProxyType(dict(self.frames))
        self.totals = MappingProxyType(dict(self.totals))
        self.io = MappingProxyType(dict(self.io or {}))  # None as the old constructor took it
        self.metadata = MappingProxyType(dict(self.metadata or {}))

    @property
    def params(self) -> pd.DataFrame:
        return DisplayFrame(self.frames["params"])

    @property
    def layers(self) -> pd.DataFrame:
        return DisplayFrame(self.frames["layers"])

    @property
    def by_type(self) -> pd.DataFrame:
        return DisplayFrame(self.frames["by_type"])

    @property
    def stats(self) -> pd.DataFrame:
        """Weight statistics, one row per tensor (schema.STATS); module roll-ups are in
        :attr:`stats_by_module`."""
        return self._stats_frame("stats")

    @property
    def stats_by_module(self) -> pd.DataFrame:
        """Weight statistics rolled up per module subtree (schema.STATS, kind 'module')."""
        return self._stats_frame("stats_by_module")

    @functools.cached_property
    def health(self) -> pd.DataFrame:
        """Weight health (schema.HEALTH): NaN/Inf counts, dead or constant weight matrices,
        exploding or vanishing scale, per tensor and rolled up per module, with the default
        :class:`~nbinspect.HealthThresholds` (``nbinspect.health(insp, exploding=...)`` for
        others). Needs the weight statistics."""
        return DisplayFrame(health_frame(self.stats, self.params, self.layers["name"].tolist()))

    @functools.cached_property
    def _folds(self) -> Folds:
        """Which repeated blocks fold (``analyze.fold``), for the text tree."""
        return fold_repeats(self.frames["layers"], self.frames.get("params"))

    @functools.cached_property
    def _views(self) -> ViewData:
        """The views' data, folding as the text tree does (its folds, computed once)."""
        return view_data(self._widget_frames(), self._folds)

    def problems(self) -> dict[str, int]:
        """Distinct tensors with each problem, e.g. ``{"NaN": 2}``; {} when healthy or when
        the statistics were not computed."""
        if "stats" not in self.frames:
            return {}
        return problem_counts(self.health, self._tied())

    def _tied(self) -> pd.Series:
        """Paths that are the same elements as an earlier path."""
        return self.params["name"][self.params["tied_to"].notna()]

    def _stats_frame(self, key: str) -> pd.DataFrame:
        if key not in self.frames:
            raise ValueError(f"{self.name} was inspected without weight statistics: use inspect(model, stats=True)")
        return DisplayFrame(self.frames[key])

    @property
    def flow(self) -> pd.DataFrame:
        """One row per module call of the traced forward pass (schema.FLOW); ``print()`` it
        for the staged view: inputs, each call with its shapes, outputs."""
        if "flow" not in self.frames:
            raise ValueError(
                f"{self.name} has no traced forward pass: use nbinspect.trace(model, x) or inspect(model, input=x)"
            )
        return TextFrame.wrap(self.frames["flow"], lambda f: flow_text(f, self.io, self.totals, self.name))

    @property
    def graph(self) -> pd.DataFrame:
        """The dataflow of the traced forward pass (schema.GRAPH): one row per tensor passed
        from a producer (module call, functional op, input) to a consumer, with its shape,
        dtype and bytes; the nodes are ``frames["graph_nodes"]``. The widget draws it in its
        Graph mode."""
        if "graph" not in self.frames:
            raise ValueError(
                f"{self.name} has no traced dataflow: use nbinspect.trace(model, x) or inspect(model, input=x)"
            )
        return DisplayFrame(self.frames["graph"])

    @property
    def memory(self) -> pd.DataFrame:
        """The training-memory plan (schema.MEMORY) when one was made (:func:`nbinspect.from_config`,
        the command line); ``print()`` it for the table with the total."""
        if "memory" not in self.frames:
            raise ValueError(f"{self.name} has no memory plan: use nbinspect.memory(model, ...)")
        return TextFrame.wrap(self.frames["memory"], memory_text, memory_html)

    def report(self, depth: int | None = 3, verbose: bool = False) -> str:
        """Everything as text: the summary, the memory plan and the traced flow when present;
        `verbose` shows every module (tree, memory) and lists every tensor."""
        parts = [self.summary(depth=None if verbose else depth, verbose=verbose)]
        if "memory" in self.frames:
            parts.append(memory_text(self.frames["memory"], top=None if verbose else 10))
        if "flow" in self.frames:
            parts.append(str(self.flow))
        if verbose:
            parts.append(tensor_listing(self.params))
        return "\n\n".join(parts)

    def _widget_frames(self) -> Mapping[str, pd.DataFrame]:
        # the health frame, computed once and cached, rather than again by the payload
        return {**self.frames, "health": self.health} if "stats" in self.frames else self.frames

    def summary(self, depth: int | None = 3, verbose: bool = False) -> str:
        """The text summary; `depth` limits the layer tree (None shows every level);
        `verbose` shows every metadata entry (else the first 60)."""
        found = self.problems()
        problems = text.health_block(problem_tensors(self.health, self._tied()), found) if found else None
        layers = self.layers
        summary = text.summary(
            self.name, self.framework, self.totals, layers, self.by_type, depth, problems, self._folds
        )
        if "components" in self.frames:  # a serving engine: its header first
            summary = engine_text(self.name, self.totals, self.io, self.frames) + "\n\n" + summary
        if self.metadata:
            summary += "\n\n" + metadata_text(self.metadata, verbose)
        return safe_lines(summary)  # names and metadata from a file cannot drive a terminal

    def _saved_summary(self) -> str:
        text = self.summary(depth=2)
        if "memory" in self.frames:  # the plan's total and largest parts
            text += "\n\n" + memory_text(self.frames["memory"], top=5)
        return text

    def __repr__(self) -> str:
        t = self.totals
        return (
            f"<Inspection {safe_text(self.name)} ({self.framework}): {t['total_params']:,} parameters, "
            f"{t['num_modules']:,} modules, frames: {', '.join(self.frames)}>"
        )

    @gc_paused()  # a dict or two per module: the collector's passes would cost more than the export
    def to_dict(self) -> dict:
        """The export document as plain Python (see :func:`nbinspect.json_schema`)."""
        return json_export.inspection_dict(
            self.name, self.framework, self.totals, self.layers, self.params, self.io, self.frames.get("memory")
        )

    def _appendix(self) -> list[str]:
        return [str(getattr(self, key)) for key in ("memory", "flow") if key in self.frames]

    def to_model_info(self, path: str | Path | None = None) -> dict:
        """The ``model_info.json`` document other tools read (layout in
        ``render/model_info_json.py``); also written to `path` as JSON when given."""
        prefix = "torch."
        with contextlib.suppress(ValueError):  # the backend spells its dtypes (unknown framework: torch's)
            prefix = getattr(backend_named(self.framework), "dtype_prefix", prefix)
        document = model_info_dict(self.name, self.framework, self.totals, self.frames, self.io, prefix)
        if path is not None:
            self._write(path, json.dumps(document, indent=2, allow_nan=False) + "\n")
        return document

    def locate(
        self, what: str | list[str], *, first: int = 10, tensors: list[str] | None = None, k: float | None = None
    ) -> pd.DataFrame:
        """Where the bad values are (schema.LOCATE), exactly: `what` is "nan", "inf",
        "outliers" (|x| > k·std, k = 6 by default), "zero_rows" (dead output units),
        "zero_columns" (dead input features), "dead" (both) or a list of them; the first
        `first` hits per tensor and kind are listed, ``total`` counts them all. Tensors the
        statistics clear are not read; those without values (meta, a deleted model) are in
        ``frame.attrs["skipped"]``."""
        if self.values is None:
            raise ValueError(f"{self.name}: no values to locate in (an engine, or a result rebuilt without its model)")
        frame = self.values.locate(what, first=first, tensors=tensors, k=k)
        shown = DisplayFrame(frame)
        shown.attrs["skipped"] = frame.attrs["skipped"]
        return shown

    def _value_access(self) -> ValueAccess | None:
        return self.values

    def framework_label(self) -> str:
        """The framework, or for a vLLM engine its one-line header (shown beside the name)."""
        return engine_label(self.totals) if "components" in self.frames else self.framework


@on_receiving_rank(0)
@gc_paused()
def inspect(
    model: Any,
    *,
    name: str | None = None,
    input: Any = None,
    backward: bool = False,
    flops: bool = True,
    input_dtype: Any = None,
    stats: bool = True,
    bins: int = 64,
    sample_input: str | None = None,
) -> Inspection:
    """Inspect `model` (a torch.nn.Module, or a ``vllm.LLM`` engine) without changing it.

    With `input` (a tensor, a shape tuple, a tuple/list of positional arguments or a dict of
    keyword arguments) one forward pass is traced as by :func:`trace`. `stats` adds the
    weight statistics (``stats`` and ``stats_by_module`` frames, `bins` histogram bins);
    ``stats=False`` skips reading the weights. For a vLLM engine the served model is read
    (see ``backends/vllm/engine.py``); `sample_input` (a prompt) adds one greedy generation."""
    if input is not None and is_engine(model):
        raise TypeError("a vLLM engine takes a prompt as sample_input='...', not input=")
    inspection, found = _read(model, pipeline.Request(stats=stats, bins=bins, sample_input=sample_input), name)
    if input is not None:
        inspection = with_forward(
            inspection,
            found.model,
            input,
            backward=backward,
            flops=flops,
            input_dtype=input_dtype,
            walk=_walk(found, model),
        )
    return inspection


def _read(model: Any, request: pipeline.Request, name: str | None = None) -> tuple[Inspection, pipeline.Found]:
    found = pipeline.read(model, request, name)
    inspection = Inspection(
        found.name, found.framework, found.frames, found.totals, found.io, found.metadata, input_paths(model)
    )
    if found.source is not None:
        frames = inspection.frames
        inspection.values = ValueAccess({None: found.source}, {None: lambda: frames.get("stats")})
    return inspection, found


def _walk(found: pipeline.Found, model: Any) -> Any:
    """The walk of `model`'s tree its source made just now, for the trace that follows at
    once; None for a source made earlier (a ModelSource given: the model may have changed)."""
    return found.source.walk if found.source is not None and found.model is model else None


@on_receiving_rank(0)
@gc_paused()
def trace(
    model: Any, *args: Any, backward: bool = False, flops: bool = True, input_dtype: Any = None, **kwargs: Any
) -> Inspection:
    """Run ``model(*args, **kwargs)`` once and return its Inspection with the trace filled in:
    the ``layers`` trace columns, the ``flow`` frame (one row per module call), FLOP and
    saved-tensor totals, and the model's inputs and outputs (``io``).

    A tuple of ints among the arguments is a shape: zeros of `input_dtype` (default the
    model's dtype) on the model's device. `backward=True` also counts backward FLOPs;
    `flops=False` skips FLOP counting, the costly part. `backward`, `flops` and
    `input_dtype` are nbinspect's; pass a model argument of the same name through
    ``inspect(model, input={...})``. Meta-device models run on fake tensors. The model is
    left exactly as it was. If the forward pass raises, :class:`TraceError` names the
    module and carries ``partial``. Weight statistics are not computed (use
    ``inspect(model, input=x)`` for both)."""
    inspection, found = _read(model, pipeline.Request(stats=False))
    return _traced(
        inspection,
        model,
        args,
        kwargs,
        backward=backward,
        flops=flops,
        input_dtype=input_dtype,
        walk=_walk(found, model),
    )


def with_forward(inspection: _I, model: Any, input: Any, **options: Any) -> _I:
    """`inspection` of `model` with one forward pass on `input` traced, as ``inspect(model,
    input=...)`` does (`options`: ``backward``, ``flops``, ``input_dtype``, ``walk``)."""
    args, kwargs = split_input(input)
    return _traced(inspection, model, args, kwargs, **options)


def with_trace(inspection: _I, result: TraceResult) -> _I:
    """`inspection` with a trace's columns, ``flow`` frame, totals and io added."""
    frames, totals, io = pipeline.trace_frames(dict(inspection.frames), dict(inspection.totals), result)
    return dataclasses.replace(inspection, frames=frames, totals=totals, io=io)


def with_memory(inspection: _I, plan: pd.DataFrame) -> _I:
    """`inspection` holding a memory plan (from :func:`memory`) as its ``memory`` frame."""
    return dataclasses.replace(inspection, frames={**inspection.frames, "memory": pd.DataFrame(plan)})


def _traced(inspection: _I, model: Any, args: tuple, kwargs: dict, **options: Any) -> _I:
    try:
        result = pipeline.run_trace(model, args, kwargs, **options)
    except TraceError as exc:
        exc.partial = with_trace(inspection, exc.result)
        raise
    return with_trace(inspection, result)


@on_receiving_rank(0)
def health(obj: Any, *, exploding: float | None = None, vanishing: float | None = None) -> pd.DataFrame:
    """Weight health (schema.HEALTH) of an Inspection or of anything :func:`inspect` takes:
    per tensor and per module, NaN/Inf counts, zero fraction, and flags for dead (all-zero)
    and constant weight matrices and for exploding (largest |x| > `exploding`, default 1e3)
    or vanishing (mean |x| of a weight matrix < `vanishing`, default 1e-6) scale."""
    insp = obj if isinstance(obj, Inspection) else inspect(obj)
    defaults = HealthThresholds()
    limits = HealthThresholds(
        exploding=defaults.exploding if exploding is None else exploding,
        vanishing=defaults.vanishing if vanishing is None else vanishing,
    )
    return health_frame(insp.stats, insp.params, insp.layers["name"].tolist(), limits)


def locate(
    obj: Any, what: str | list[str], *, first: int = 10, k: float | None = None, **options: Any
) -> pd.DataFrame | None:
    """Where the bad values are (schema.LOCATE): ``obj.locate(...)`` for an Inspection or a
    Comparison (`options`: ``tensors``, ``side``); for a model, state_dict or checkpoint path,
    without computing statistics first. A model sharded over ranks (DTensor) is a
    collective: call it on every rank; each scans its own block and rank 0 receives the
    frame (None on the others). See :meth:`Inspection.locate` for `what`."""
    from .analyze.locate import locate_sharded
    from .analyze.values import OUTLIER_SIGMA
    from .backends import as_source
    from .backends.torch.values import tensor_bands

    if isinstance(obj, Result):
        return obj.locate(what, first=first, k=k, **options)  # type: ignore[attr-defined]  # both results have it
    source = as_source(obj)
    if source.collective is not None:

        def bands_of(t: Any) -> Any:
            return lambda name, plane, n: tensor_bands(
                t, plane, (0, plane.size(tuple(t.shape))[0]), (0, plane.size(tuple(t.shape))[1]), n
            )

        return locate_sharded(source, what, bands_of, first=first, k=OUTLIER_SIGMA if k is None else k)
    return Inspection(source.name, source.framework, {}, {}, values=ValueAccess({None: source})).locate(
        what, first=first, k=k, **options
    )


def value_grid(obj: Any, tensor: str, **request: Any) -> dict[str, Any] | None:
    """One tensor's values at screen resolution, as the widget's heatmap gets them: the
    header (blocks, colour limits, NaN/±Inf counts, ...) and 2-D numpy arrays ``index``
    (palette index), ``flags``, ``value`` (block mean, or the value itself when ``exact``)
    and ``absmax``. `request`: ``rows``/``cols`` ([start, stop) of the picture), ``height``/
    ``width`` (pixels), ``plane``, ``stat`` ("mean" or "absmax"), ``limit``, ``side`` (a
    Comparison's "a", "b", "delta"). A model sharded over ranks is a collective: call it on
    every rank; each rank reduces its own block and rank 0 receives the merged grid."""
    from .backends import as_source

    if isinstance(obj, Result):
        access = obj._value_access()
        if access is None:
            raise ValueError(f"{obj.name}: no values behind this result")
    else:
        access = ValueAccess({None: as_source(obj)}, collective=True)
        obj = access._sides[None].source()
    header, buffers = access.region({"tensor": tensor, **request})
    collective = getattr(obj, "collective", None)
    if collective is not None and not collective.receives():
        return None
    if header["state"] != "ok":
        raise ValueError(f"{tensor}: {header['state']}: {header['message']}")
    h, w = header["grid"]
    kinds = (("index", np.uint8), ("flags", np.uint8), ("value", np.float64), ("absmax", np.float32))
    arrays = {key: np.frombuffer(b, dtype).reshape(h, w) for (key, dtype), b in zip(kinds, buffers)}
    return {"header": {k: v for k, v in header.items() if k not in ("palette", "special", "flags")}, **arrays}


@on_receiving_rank(0)
def memory(model: Any, **options: Any) -> pd.DataFrame:
    """The memory one training step of `model` needs (schema.MEMORY): whole-model rows
    (parameters, buffers, gradients, optimizer_state, activations, inputs, total), then rows
    per module. Options: ``input`` (traced for activations), ``batch_size``, ``optimizer``
    (adam, adamw, sgd, ...), ``precision`` (fp32, bf16, fp16, amp-bf16, amp-fp16),
    ``grad_checkpointing``, ``master_weights``, ``input_dtype``. ``print()`` it for the
    table with the total."""
    return TextFrame.wrap(pipeline.plan_memory(model, **options), memory_text, memory_html)


def plot_distributions(model_or_stats: Any, path: str | Path | None = None, *, bins: int = 64, **options: Any) -> Any:
    """A matplotlib Figure of per-tensor weight histograms with their mean/std/min/max, saved
    to `path` when given. `model_or_stats` is a stats frame (from :func:`nbinspect.stats`)
    or anything ``stats()`` accepts. Options (see ``render.plots.distribution_figure``):
    ``pattern`` (regex on names), ``top`` (largest k), ``page``/``per_page``/``cols``,
    ``buffers``, ``log``, ``title``, ``dpi``. Large models are paged, 16 panels a page.
    Raises ImportError when matplotlib is missing."""
    if isinstance(model_or_stats, pd.DataFrame):
        frame = model_or_stats
    else:
        frame = stats_frames(model_or_stats, bins, by=("tensor",))["tensor"]
    return distribution_figure(frame, path=path, **options)
