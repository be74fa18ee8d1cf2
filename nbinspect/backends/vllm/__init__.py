"""vLLM engines: the served torch model read inside the engine's workers (frames cross the
process boundary, weights never do), with the engine's own facts beside it."""

from __future__ import annotations

from typing import Any

from ...core.source import ModelSource
from .engine import engine_report, is_vllm_engine
from .worker import served_model

__all__ = ["BACKEND"]


def _no_source(obj: Any, name: str | None) -> ModelSource:
    raise TypeError(
        "a vLLM engine is read as a whole (nbinspect.inspect(llm)), not as a source: its weights live in its workers"
    )


class VllmBackend:
    name = "vllm"
    recognizes = staticmethod(is_vllm_engine)
    source = staticmethod(_no_source)
    engine = staticmethod(engine_report)  # (llm, worker_report, **options) -> EngineReport
    served = staticmethod(served_model)  # inside a worker: what it serves, as sources


BACKEND = VllmBackend()
