"""vLLM tests run in .venv-vllm (`make test-vllm`). Elsewhere they skip, except in CI
(CI=true), where a missing vLLM is a failure."""

from __future__ import annotations

import importlib
import os

import pytest


def require_vllm() -> None:
    """Call at the top of a test module, before importing vLLM."""
    try:
        importlib.import_module("vllm")
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"vLLM is not installed in this environment ({exc}): run `make test-vllm`") from None
        pytest.skip(f"vLLM is not installed here ({exc}): `make test-vllm` builds .venv-vllm", allow_module_level=True)
