"""The entry point that runs inside a vLLM worker: ``LLM(...,
worker_extension_cls="nbinspect.ui.vllm_worker.InspectWorkerExtension")`` mixes it into the
engine's workers, and nbinspect then reaches an engine in another process by method name,
without ``VLLM_ALLOW_INSECURE_SERIALIZATION``."""

from __future__ import annotations

from typing import Any

from ..pipeline import worker_report

__all__ = ["InspectWorkerExtension"]


class InspectWorkerExtension:
    def nbinspect_report(self, options: dict[str, Any]) -> bytes:
        return worker_report(self, options)
