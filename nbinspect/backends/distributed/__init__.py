"""Models sharded across processes (``DTensor`` parameters: FSDP2, tensor parallelism):
global shapes, each rank's share of the values, combined with ``torch.distributed``. Their
forward pass, memory plan and regions are torch's (DTensor dispatch, this rank's share)."""

from __future__ import annotations

import sys
from typing import Any

from ..torch import TorchBackend
from .reduce import receives
from .source import from_sharded_module, is_sharded_module

__all__ = ["BACKEND"]


def _is_sharded(obj: Any) -> bool:
    # no DTensor can exist before its module is imported
    return "torch.distributed.tensor" in sys.modules and TorchBackend.recognizes(obj) and is_sharded_module(obj)


class DistributedBackend(TorchBackend):
    name = "distributed"
    recognizes = staticmethod(_is_sharded)
    source = staticmethod(from_sharded_module)
    receives = staticmethod(receives)


BACKEND = DistributedBackend()
