"""vLLM engines: the served torch model read inside the engine's workers (frames cross the
process boundary, weights never do), with the engine's own facts beside it."""

from __future__ import annotations

from typing import Any

from ...core.backend import EngineFrames
from ...core.source import ModelSource

__all__ = ["BACKEND"]


class VllmBackend:
    name = "vllm"

    def recognizes(self, obj: Any) -> bool:
        from .engine import is_vllm_engine

        return is_vllm_engine(obj)

    def source(self, obj: Any, name: str | None) -> ModelSource:
        raise TypeError(
            "a vLLM engine is read as a whole (nbinspect.inspect(llm)), not as a source: "
            "its weights live in the engine's workers"
        )

    def engine(self, obj: Any, worker_report: EngineFrames, **options: Any) -> Any:
        """The engine's frames, totals and io (an :class:`~.engine.EngineReport`)."""
        from .engine import engine_report

        return engine_report(obj, worker_report, **options)

    def served(self, worker: Any) -> Any:
        """What a worker serves, as sources (runs inside the worker)."""
        from .worker import served_model

        return served_model(worker)


BACKEND = VllmBackend()
