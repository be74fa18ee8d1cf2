"""An independent reference for saved-tensor bytes: walk the autograd graph a real forward
pass built and read every node's ``_saved_*`` tensors, each memory block once (by address)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from nbinspect.core.inputs import tensors_in


def graph_saved_bytes(output: Any, model: torch.nn.Module, inputs: Iterable[torch.Tensor]) -> int:
    """Bytes saved for backward by the graph behind `output`, without the model's parameters,
    buffers and `inputs` (which are not activations)."""
    exclude = {t.untyped_storage().data_ptr() for t in (*model.parameters(), *model.buffers(), *inputs)}
    storages: dict[int, int] = {}
    stack = [t.grad_fn for t in tensors_in(output) if t.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for name in dir(node):
            if not name.startswith("_saved_"):
                continue
            value = getattr(node, name)
            for t in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(t, torch.Tensor) and t.numel():
                    ptr = t.untyped_storage().data_ptr()
                    if ptr not in exclude:
                        storages[ptr] = t.untyped_storage().nbytes()
        stack.extend(next_node for next_node, _ in node.next_functions)
    return sum(storages.values())
