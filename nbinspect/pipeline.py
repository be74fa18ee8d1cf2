"""One pipeline: a request -> one source -> every frame and total.

``inspect``, ``trace``, the command line, the magic and the code that runs inside a vLLM
worker all come through here, so a model is turned into a source once and each frame is
built by one analyzer. The backend that recognised the model does what needs its framework
(reading the model, tracing, planning memory); the analyzers build the frames.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .analyze import structure
from .analyze.compare import compare_frame
from .analyze.graph import graph_frames
from .analyze.moe import expert_groups, moe_totals
from .analyze.stats import frames_of, stats_frames, tensor_stats
from .analyze.trace_frames import flow, layers_with_trace
from .backends import as_source, backend_for, backend_named
from .core.memory import PlanOptions
from .core.source import ModelSource
from .core.trace import TraceResult

__all__ = ["Found", "Request", "plan_memory", "read", "run_trace", "trace_frames", "worker_report"]


@dataclass(frozen=True)
class Request:
    """What to compute about a model."""

    stats: bool = True  # weight statistics (the `stats` and `stats_by_module` frames)
    bins: int = 64  # histogram bins
    sample_input: str | None = None  # an engine's prompt: one greedy generation


@dataclass
class Found:
    """Every frame and total the request asked for, and where they came from."""

    name: str
    framework: str
    frames: dict[str, pd.DataFrame]
    totals: dict[str, Any]
    io: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    model: Any = None  # the live model, when there is one to trace
    source: ModelSource | None = None  # where the values are (the value view, locate)


def read(model: Any, request: Request = Request(), name: str | None = None) -> Found:
    """The frames and totals of `model` (anything :func:`~nbinspect.backends.as_source`
    takes, or a serving engine a backend recognises)."""
    backend = None if isinstance(model, ModelSource) else backend_for(model)
    engine = getattr(backend, "engine", None)
    if engine is not None:  # an engine: its workers build the frames (worker_report below)
        r = engine(model, worker_report, stats=request.stats, bins=request.bins, sample_input=request.sample_input)
        return Found(name or r.name, backend.name, r.frames, r.totals, r.io)  # type: ignore[union-attr]  # engine implies backend
    if request.sample_input is not None:
        raise TypeError("sample_input= is a prompt for a vLLM engine; a torch model takes input=")
    source = as_source(model, name)
    found = Found(source.name, source.framework, _frames(source, request), structure.totals(source))
    found.metadata, found.model, found.source = dict(source.metadata), source.model, source
    groups = expert_groups(source)
    if groups:  # a mixture of experts: what one token uses, beside the total
        moe = moe_totals(found.totals["total_params"], groups)
        found.totals.update(activated_params=moe["activated_params"], routed_params=moe["routed_params"])
    return found


def _frames(source: ModelSource, request: Request, moments: Any = None) -> dict[str, pd.DataFrame]:
    frames = {
        "params": structure.params(source),
        "layers": structure.layers(source),
        "by_type": structure.by_type(source),
    }
    if request.stats:
        by = stats_frames(source, request.bins) if moments is None else frames_of(source, moments, request.bins)
        frames.update(stats=by["tensor"], stats_by_module=by["module"])
    return frames


def run_trace(model: Any, args: tuple, kwargs: dict, walk: Any = None, **options: Any) -> TraceResult:
    """One forward pass of `model`, recorded by its backend (see ``backends/torch/trace.py``).
    `walk`: ``ModelSource.walk`` of the source just made of `model`, which its backend's
    trace takes instead of walking the model again."""
    backend = backend_for(model) or backend_named("torch")  # torch's trace names what is not a model
    if walk is not None:
        options["walk"] = walk
    return backend.trace(model, args, kwargs, **options)


def trace_frames(
    frames: dict[str, pd.DataFrame], totals: dict[str, Any], result: TraceResult
) -> tuple[dict[str, pd.DataFrame], dict[str, Any], dict[str, Any]]:
    """`frames` and `totals` with a trace's columns, ``flow`` frame and totals added; and the io."""
    flow_frame = flow(result)
    frames = {**frames, "layers": layers_with_trace(frames["layers"], result, flow_frame), "flow": flow_frame}
    if result.dataflow is not None:
        frames["graph"], frames["graph_nodes"] = graph_frames(
            result.dataflow, flow_frame, frames["layers"], frames.get("params")
        )
    totals = {**totals, **result.totals, "fake_tensors": result.fake}
    return frames, totals, {"input": result.inputs, "output": result.outputs}


def plan_memory(model: Any, **options: Any) -> pd.DataFrame:
    """The training-memory plan (schema.MEMORY), made by the backend of `model`'s source."""
    source = as_source(model)
    return backend_named(source.framework).plan_memory(source, PlanOptions(**options))


def worker_report(worker: Any, options: dict[str, Any]) -> bytes:
    """The frames of the model a serving engine's worker holds, pickled (frames only, never
    weights), with global shapes and counts; this runs inside the worker.

    `options`: ``backend`` (the engine backend's name), ``stats``, ``bins``, ``folder`` (the
    checkpoint folder to compare with, or None), ``moments`` (global Moments by name, merged
    from the ranks' shares: the stats are built from them). ``step`` "moments" or
    "histograms" (with ``ranges``) answers one round of the ranks' merge instead
    (:func:`nbinspect.core.collective.merge_ranks`)."""
    served = backend_named(options["backend"]).served(worker)  # type: ignore[attr-defined]  # an engine backend's
    source, bins = served.source, options.get("bins", 64)
    if options.get("step") == "moments":
        by_key = tensor_stats(source, bins, progress=False)
        return pickle.dumps({t.name: by_key[t.storage_key] for t in source.tensors})
    if options.get("step") == "histograms":
        return pickle.dumps(served.histograms(options["ranges"], bins))
    given = options.get("moments")
    moments = None if given is None else served.moments(given)
    frames = _frames(source, Request(stats=bool(options.get("stats")), bins=bins), moments)
    checkpoint = served.checkpoint(options.get("folder")) if options.get("stats") else None
    if checkpoint is not None:
        frames["compare"] = compare_frame(checkpoint, served.weights)
    return pickle.dumps({"frames": frames, "totals": structure.totals(source), **served.facts})
