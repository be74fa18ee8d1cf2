"""A live torch.nn.Module as a source. Reads names, shapes and flags; changes nothing."""

from __future__ import annotations

import torch
from torch import nn

from ..dtypes import dtype_name
from ..schema import BUFFER, PARAMETER
from .base import ModelSource, ModuleEntry, TensorEntry
from .torch_attrs import layer_attrs

_DEVICE_NAMES: dict[torch.device, str] = {}


def _device_name(device: torch.device) -> str:
    name = _DEVICE_NAMES.get(device)
    if name is None:
        name = _DEVICE_NAMES[device] = str(device)
    return name


def storage_key(tensor: torch.Tensor):
    """Equal for two tensors that hold the same elements in memory (tied weights).

    Keyed by the address of the first element, the element count and dtype, so the same
    Parameter at two paths, or two Parameters viewing the same memory (also transposed),
    count once. Tensors without real memory (meta, fake, empty, sparse) fall back to object
    identity: their addresses are all 0 or undefined and would wrongly look shared.
    """
    try:
        if tensor.layout != torch.strided or tensor.numel() == 0:
            return ("id", id(tensor))
        ptr = tensor.data_ptr()  # 0 on the meta device
        return ("mem", ptr, tensor.numel(), tensor.dtype) if ptr else ("id", id(tensor))
    except Exception:  # fake/functional tensors and exotic subclasses have no storage
        return ("id", id(tensor))


def _tensor_entry(name: str, module: str, kind: str, tensor: torch.Tensor, requires_grad: bool) -> TensorEntry:
    if isinstance(tensor, nn.parameter.UninitializedTensorMixin):  # type: ignore[attr-defined]  # not in the stubs  # lazy: no shape yet
        shape, numel, nbytes, key = None, 0, 0, ("id", id(tensor))
    else:
        shape, numel = tuple(tensor.shape), tensor.numel()
        nbytes, key = numel * tensor.element_size(), storage_key(tensor)
    return TensorEntry(
        name,
        module,
        kind,
        shape,
        dtype_name(tensor.dtype),
        _device_name(tensor.device),
        numel,
        nbytes,
        requires_grad,
        key,
        tensor,
    )


def from_module(model: nn.Module, name: str | None = None) -> ModelSource:
    modules: list[ModuleEntry] = []
    tensors: list[TensorEntry] = []
    first_path: dict[int, str] = {}
    # remove_duplicate=False: a module registered at two paths shows at both, so the tree
    # is the tree the user wrote; alias_of says it is the same object.
    for path, module in model.named_modules(remove_duplicate=False):
        alias_of = first_path.setdefault(id(module), path)
        modules.append(
            ModuleEntry(
                name=path,
                type=type(module).__name__,
                is_leaf=not module._modules,
                training=module.training,
                attrs=layer_attrs(module),
                alias_of=None if alias_of == path else alias_of,
            )
        )
        prefix = f"{path}." if path else ""
        for local, p in module._parameters.items():
            if p is not None:
                tensors.append(_tensor_entry(prefix + local, path, PARAMETER, p, p.requires_grad))
        for local, b in module._buffers.items():
            if b is not None:
                tensors.append(_tensor_entry(prefix + local, path, BUFFER, b, False))
    return ModelSource(
        name=name or type(model).__name__,
        framework="torch",
        modules=tuple(modules),
        tensors=tuple(tensors),
        model=model,
    )
