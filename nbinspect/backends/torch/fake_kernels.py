"""The FakeTensorMode traces run under, with stand-ins for meta kernels that are stricter
than the real ones.

``aten._grouped_mm`` (fused mixture-of-experts layers, Mixtral in transformers) has a meta
kernel that accepts only bf16, while the CPU and CUDA kernels take float32 too: a float32
Mixtral on the meta device failed to trace. The mode runs the meta kernel on bf16 stand-ins
of the floating arguments (fake tensors: nothing is allocated), so the meta kernel still
decides the output's shape, and returns the result in the dtype the real kernel would.
FLOPs are counted outside (the FLOP counter sees the op with its real dtypes first).

A subclass rather than a second dispatch mode entered inside FakeTensorMode: every op of a
fake trace passes through Python once less (a second mode cost ~20% of GPT-2's memory plan).
Metadata queries (``prim.device``: 61% of the dispatches of GPT-2's plan, asked by C++
kernels of every op) are answered by FakeTensorMode's own handlers without its dispatch
wrappers (about a tenth of the plan). Every other op goes straight to FakeTensorMode's op
cache (its dispatch's dynamo and stats wrappers and per-op log call skipped when not logging).

The cache itself is torch's; two of its steps are done directly where a cheap test shows
nothing but plain values is involved (no ShapeEnv, no proxy tracing, dense fakes of this
mode): the key (torch's, built without a TensorMetadata object per argument: half of a
cache hit) and the output of a hit (the meta tensor made under one inlined
``in_kernel_invocation_manager``, the FakeTensor given a copy of the attributes torch's
constructor gave the first one on that device). Anything else goes torch's way. The import
checks the fields and signatures these copy, the first fast key of a process is checked
against torch's, and tests compare both with torch's on every op of memory plans.

:func:`stand_in` makes the fakes that parameters and buffers are swapped for. A plain dense
tensor's fake is made from a meta tensor of its shape and strides, as FakeTensorMode's
converter ends up making it, without describing the real tensor first (swapping GPT-2's 149
tensors: 28-39 -> 8-10 ms, a tenth of its memory plan); anything else is converted by
``from_tensor``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Mapping, Sequence
from itertools import chain, repeat
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.fx.experimental.proxy_tensor import get_proxy_mode
from torch.utils._mode_utils import no_dispatch

__all__ = ["ShimmedFakeMode", "stand_in"]

_BF16_ONLY = {torch.ops.aten._grouped_mm.default} if hasattr(torch.ops.aten, "_grouped_mm") else set()
_METADATA = getattr(fake_tensor, "_DISPATCH_META_HANDLERS", {})  # what FakeTensorMode.dispatch answers first
_DIRECTLY = getattr(fake_tensor, "_DISPATCH_HANDLE_DIRECTLY", ())  # and then
_LOG = logging.getLogger(fake_tensor.__name__)  # FakeTensorMode.dispatch logs every op at DEBUG


def _bf16(x: Any) -> Any:
    return x.to(torch.bfloat16) if isinstance(x, torch.Tensor) and x.is_floating_point() else x


class ShimmedFakeMode(FakeTensorMode):
    """FakeTensorMode, with the ops of ``_BF16_ONLY`` run on bf16 stand-ins, the cache key of
    plain arguments computed directly and plain outputs of cache hits made directly."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._attrs_on: dict[torch.device, dict[str, Any]] = {}  # see _wrap

    def __torch_dispatch__(
        self, func: Any, types: Sequence[type], args: Sequence[Any] = (), kwargs: Mapping[str, Any] = {}
    ) -> Any:
        answer = _METADATA.get(func)
        if answer is not None:
            return answer(args)
        if func in _BF16_ONLY and args and args[0].dtype != torch.bfloat16:
            out_dtype = kwargs.get("out_dtype") or args[0].dtype
            rest = {k: v for k, v in kwargs.items() if k != "out_dtype"}
            return func(*map(_bf16, args), **rest).to(out_dtype)  # the mode is off here: fakes dispatch back to it
        if _DISPATCH_FITS and self.cache_enabled and func not in _DIRECTLY and _LOG.getEffectiveLevel() > logging.DEBUG:
            # what FakeTensorMode.dispatch comes to, without its wrappers (dynamo is off in this one already)
            return self._cached_dispatch_impl(func, types, args, kwargs or {})
        return super().__torch_dispatch__(func, types, args, kwargs)

    def _cache_key(self, state: Any, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        key = _fast_key(self, func, args, kwargs)
        if key is None:
            return super()._cache_key(state, func, args, kwargs)
        if ShimmedFakeMode._fast_key_agrees is None:  # the first fast key of the process: torch's must be the same
            ShimmedFakeMode._fast_key_agrees = key == super()._cache_key(state, func, args, kwargs)
        return key if ShimmedFakeMode._fast_key_agrees else super()._cache_key(state, func, args, kwargs)

    _fast_key_agrees: bool | None = None

    def _get_output_tensor_from_cache_entry(self, state: Any, entry: Any, key: Any, func: Any, args: Any) -> Any:
        """torch's, for a plain dense output with static shapes: the meta tensor made under one
        inlined in_kernel_invocation_manager, wrapped by :meth:`_wrap`."""
        meta = entry.metadata
        if not _OUTPUT_FITS or meta is None or entry.inplace_idx is not None or self.shape_env is not None:
            return super()._get_output_tensor_from_cache_entry(state, entry, key, func, args)
        shape, stride, offset = meta.shape, meta.stride, meta.storage_offset
        view = isinstance(func, torch._ops.OpOverload) and func.is_view
        kinds = {type(offset), type(meta.storage_bytes), *map(type, shape), *map(type, stride)}
        base = args[entry.view_idx] if view else None
        if meta.is_conj or meta.is_neg or not kinds <= _INT_OR_NONE or (view and type(base) is not FakeTensor):
            return super()._get_output_tensor_from_cache_entry(state, entry, key, func, args)
        storage = (
            base.untyped_storage() if base is not None else None
        )  # a view shares its base's storage, as in torch's
        before = self.in_kernel_invocation
        with torch._C._DisableTorchDispatch(), torch._C._PreserveDispatchKeyGuard():
            torch._C._set_meta_in_tls_dispatch_include(True)
            self.in_kernel_invocation = True
            try:
                made = torch.empty_strided(
                    shape, stride, dtype=meta.dtype, layout=meta.layout, device="meta", requires_grad=meta.requires_grad
                )
                if storage is not None:
                    made.set_(storage, offset, shape, stride)
            finally:
                self.in_kernel_invocation = before
        return self._wrap(made, meta.device)

    def _wrap(self, meta: torch.Tensor, device: torch.device) -> FakeTensor:
        """``FakeTensor(self, meta, device)``: the first one on each device made by torch, the
        others given a copy of its attributes (all independent of `meta`: the mode, the device,
        Nones), unless torch's constructor set other ones."""
        if fake_tensor.FakeTensorConfig.debug or torch.compiler.is_exporting():
            return FakeTensor(self, meta, device)  # a traceback each, or a leak tracker
        attrs = self._attrs_on.get(device)
        if not attrs:
            made = FakeTensor(self, meta, device)
            if attrs is None:
                self._attrs_on[device] = _attrs_of(made)
            return made
        made = torch.Tensor._make_subclass(
            FakeTensor, meta, meta.requires_grad, dispatch_device=True, device_for_backend_keys=attrs["_fake_device"]
        )
        if self._allow_unsafe_data_ptr_access:
            torch._C._set_warn_deprecated_on_mutable_data_ptr(made)
        else:
            torch._C._set_throw_on_mutable_data_ptr(made)
        vars(made).update(attrs)
        return made


class _NotPlain(Exception):
    pass


def _fast_key(mode: FakeTensorMode, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
    """FakeTensorMode._cache_key's key, made without its metadata objects, when every
    argument is a plain value or a dense fake of `mode` with static shapes; else None."""
    if not _KEY_FITS or mode.shape_env is not None or mode.in_kernel_invocation or get_proxy_mode() is not None:
        return None
    # torch's context: default dtype and device, inference mode, no ShapeEnv settings, not tracing
    key = [
        func,
        torch.get_default_dtype(),
        torch._C._get_default_device(),
        torch.is_inference_mode_enabled(),
        None,
        False,
    ]
    try:
        _flatten(key, [c for c in (args, kwargs) if c], mode)  # each with its type and length, as torch's
    except _NotPlain:
        return None
    return fake_tensor._DispatchCacheKey(tuple(key))


def _flatten(key: list, args: Sequence[Any], mode: FakeTensorMode) -> None:
    """FakeTensorMode._prep_args_for_hash on exact types it treats plainly: a value goes in
    with its type, a container with its type and length, a fake as its TensorMetadata."""
    for arg in args:
        kind = type(arg)
        if kind in _ATOMS:
            key += (kind, arg)
        elif kind is FakeTensor:
            _fake(key, arg, mode)
        elif kind in _SEQUENCES:
            key += (kind, f"length_{len(arg)}")
            _flatten(key, arg, mode)
        elif kind is dict:
            key += (dict, f"length_{len(arg)}")
            _flatten(key, arg.keys(), mode)
            _flatten(key, arg.values(), mode)
        else:
            raise _NotPlain


def _fake(key: list, t: FakeTensor, mode: FakeTensorMode) -> None:
    """extract_tensor_metadata(t)._flatten_into(key) for a dense fake with static shapes (a
    strided layout: not sparse; the fake's own mode, not in a kernel: its device is its fake one)."""
    if t.fake_mode is not mode or t.constant is not None or t.layout != torch.strided or t._has_symbolic_sizes_strides:
        raise _NotPlain
    shape, stride = t.shape, t.stride()
    length = f"length_{len(shape)}"
    layout = _suggested_format(shape, stride) if len(shape) in (4, 5) else torch.contiguous_format
    key += (t.dtype, torch.Size, length)
    key += chain.from_iterable(zip(repeat(int), shape))
    key += (tuple, length)
    key += chain.from_iterable(zip(repeat(int), stride))
    key += (
        t._fake_device, torch.strided, layout if t.is_contiguous(memory_format=layout) else None, t.storage_offset(),
        t.untyped_storage().nbytes(), t.requires_grad, t.is_quantized, t.is_conj(), t.is_neg(), t.is_inference(),
        False, None, None, None,
    )  # fmt: skip


def _suggested_format(shape: Sequence[int], stride: Sequence[int]) -> torch.memory_format:
    """torch._prims_common.suggest_memory_format of a 4-d or 5-d tensor with static shapes
    (are_strides_like_channels_last_or_false, its guards on plain ints)."""
    if stride[1] == 0:
        return torch.contiguous_format
    low = 0
    for d in (1, 3, 2, 0) if len(shape) == 4 else (1, 4, 3, 2, 0):
        if shape[d] == 0 or stride[d] < low or (d == 0 and low == stride[1]):
            return torch.contiguous_format
        low = stride[d] * shape[d]
    return torch.channels_last if len(shape) == 4 else torch.channels_last_3d


def _dispatch_fits() -> bool:
    """Whether FakeTensorMode.dispatch still comes to what ShimmedFakeMode does instead."""
    method = inspect.signature(FakeTensorMode._cached_dispatch_impl)
    return bool(_DIRECTLY) and list(method.parameters) == ["self", "func", "types", "args", "kwargs"]


def _attrs_of(made: FakeTensor) -> dict[str, Any]:
    """The attributes FakeTensor's constructor gave `made`, when they are the ones that do not
    depend on the meta tensor (the mode, the device, Nones); else {}."""
    attrs = dict(vars(made))
    known = attrs.keys() == _FAKE_ATTRS and attrs["fake_mode"] is made.fake_mode
    return attrs if known and all(v is None for k, v in attrs.items() if k not in ("_fake_device", "fake_mode")) else {}


def _output_fits() -> bool:
    """Whether torch's cache entries and the method that makes their outputs are as
    ShimmedFakeMode._get_output_tensor_from_cache_entry assumes."""
    method = inspect.signature(FakeTensorMode._get_output_tensor_from_cache_entry)
    info = getattr(fake_tensor, "_DispatchCacheEntryOutputInfo", None)
    return (
        list(method.parameters) == ["self", "state", "entry", "key", "func", "args"]
        and info is not None
        and [f.name for f in dataclasses.fields(info)] == ["inplace_idx", "metadata", "view_idx", "constant_value"]
    )


def _key_fits() -> bool:
    """Whether torch's key is still made as _fast_key assumes: the metadata's fields and the
    methods' signatures (the first fast key of a process is also checked against torch's)."""
    fields = tuple(f.name for f in dataclasses.fields(fake_tensor.TensorMetadata))
    methods = [inspect.signature(getattr(FakeTensorMode, name)) for name in ("_cache_key", "_prep_args_for_hash")]
    return (
        fields == _METADATA_FIELDS
        and list(methods[0].parameters) == ["self", "state", "func", "args", "kwargs"]
        and list(methods[1].parameters) == ["self", "result", "args", "state", "id_hashed_objects"]
        and hasattr(fake_tensor, "_DispatchCacheKey")
    )


_METADATA_FIELDS = (
    "dtype", "shape", "stride", "device", "layout", "memory_format", "storage_offset", "storage_bytes",
    "requires_grad", "is_quantized", "is_conj", "is_neg", "is_inference", "is_sparse", "is_coalesced",
    "dense_dim", "sparse_dim",
)  # fmt: skip
_ATOMS = {int, float, bool, complex, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format}
_SEQUENCES = {list, tuple, torch.Size}
_KEY_FITS = _key_fits()
_INT_OR_NONE = {int, type(None)}
_MEMOS = ("nonzero", "item", "unique", "unique_consecutive", "nested_int")  # FakeTensor's memo descriptors
_FAKE_ATTRS = {"_fake_device", "fake_mode", "constant", "pytype", "dispatch_keys", "real_tensor"} | {
    f"_{memo}_memo{part}" for memo in _MEMOS for part in ("", "_vc", "_epoch")
}
_DISPATCH_FITS = _dispatch_fits()
_OUTPUT_FITS = _output_fits()


def stand_in(t: torch.Tensor, mode: FakeTensorMode, device: torch.device | None, dtype: torch.dtype | None) -> Any:
    """A fake tensor like `t`, on `device` (t's own when None), floating ones in `dtype` when
    given, with t's shape, strides and ``requires_grad``; a leaf, nothing allocated."""
    floating = t.is_floating_point()
    kind = dtype if dtype is not None and floating else t.dtype
    if _plain(t):
        with no_dispatch():  # the meta tensor is made by torch, not by the mode
            meta = torch.empty_strided(t.shape, t.stride(), dtype=kind, device="meta", requires_grad=t.requires_grad)
        made = mode.fake_tensor_converter.from_meta_and_device(mode, meta, device or t.device)
        if device is None and kind == t.dtype:  # what from_tensor(t) gives: code that reaches t itself gets this one
            mode.fake_tensor_converter.set_tensor_memo(t, made)
        return made
    fake: torch.Tensor
    if device is None:
        fake = mode.from_tensor(t)
    else:
        fake = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=device)
    if kind != fake.dtype:
        fake = fake.detach().to(kind)
    if floating and fake.requires_grad != t.requires_grad:
        fake = fake.detach().requires_grad_(t.requires_grad)
    return fake


def _plain(t: torch.Tensor) -> bool:
    """A dense tensor that owns all of its storage: its fake needs nothing but shape, strides
    and dtype (subclasses, views, quantized, sparse, conjugate or inference tensors do)."""
    if type(t) not in _PLAIN or t.layout != torch.strided or t.is_quantized or t._is_view():
        return False
    if t.is_conj() or t.is_neg() or t.is_inference() or t.storage_offset() != 0:
        return False
    if t.untyped_storage().nbytes() != t.numel() * t.element_size():
        return False
    return t.is_contiguous() or _dense(t.shape, t.stride())


def _dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Every element at its own place of a gapless block: strides, smallest first, step by
    the sizes before them (a transposed or channels-last tensor; not an expanded one)."""
    step = 1
    for size, stride in sorted(((n, s) for n, s in zip(shape, strides) if n != 1), key=lambda p: p[1]):
        if stride != step:
            return False
        step *= size
    return True


_PLAIN = (torch.Tensor, torch.nn.Parameter)
