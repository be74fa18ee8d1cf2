"""A live torch.nn.Module as a source. Reads names, shapes and flags; changes nothing."""

from __future__ import annotations

import torch
from torch import nn

from ..schema import BUFFER, PARAMETER
from .base import ModelSource, ModuleEntry, TensorEntry
from .torch_attrs import layer_attrs


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def storage_key(tensor: torch.Tensor):
    """Equal for two tensors that hold the same elements in memory (tied weights).

    Keyed by the storage address, offset, element count and dtype, so the same Parameter
    at two paths, or two Parameters viewing the same memory, count once. Tensors without
    real memory (meta, fake, empty, sparse) fall back to object identity: their addresses
    are all 0 or undefined and would wrongly look shared.
    """
    try:
        if tensor.numel() == 0 or tensor.device.type == "meta" or tensor.layout != torch.strided:
            return ("id", id(tensor))
        ptr = tensor.untyped_storage().data_ptr()
        if ptr == 0:
            return ("id", id(tensor))
        return ("mem", ptr, tensor.storage_offset(), tensor.numel(), tensor.dtype)
    except Exception:  # fake/functional tensors and exotic subclasses have no storage
        return ("id", id(tensor))


def _tensor_entry(name: str, module: str, kind: str, tensor: torch.Tensor, requires_grad: bool) -> TensorEntry:
    lazy = isinstance(tensor, nn.parameter.UninitializedTensorMixin)
    shape = None if lazy else tuple(tensor.shape)
    numel = 0 if lazy else tensor.numel()
    return TensorEntry(
        name=name,
        module=module,
        kind=kind,
        shape=shape,
        dtype=dtype_name(tensor.dtype),
        device=str(tensor.device),
        numel=numel,
        nbytes=0 if lazy else numel * tensor.element_size(),
        requires_grad=requires_grad,
        storage_key=("id", id(tensor)) if lazy else storage_key(tensor),
        tensor=tensor,
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
