"""Trainer callbacks, each imported only when used (neither transformers nor Lightning is
needed for the rest of nbinspect):

- :class:`HFTrackingCallback` (transformers ``TrainerCallback``) and :func:`attach`;
- :class:`LightningTrackingCallback` (Lightning ``Callback``).

Each is constructed with a :class:`~nbinspect.track.ModelAnalysisManager` (and optionally
a fixed batch, ``inputs=``, for the metrics that run the model). A plain loop needs no
callback: call ``manager.on_optimizer_step(model, inputs, optimizer)`` after
``optimizer.step()``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .hf import HFTrackingCallback, attach
    from .lightning import LightningTrackingCallback

__all__ = ["HFTrackingCallback", "LightningTrackingCallback", "attach"]

_WHERE = {"HFTrackingCallback": "hf", "attach": "hf", "LightningTrackingCallback": "lightning"}
_NEEDS = {"hf": "transformers", "lightning": "lightning"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _WHERE[name]
    try:
        return getattr(importlib.import_module(f".{module}", __name__), name)
    except ImportError as exc:
        raise ImportError(f"{name} needs {_NEEDS[module]}: pip install 'nbinspect[track]' ({exc})") from exc
