"""The trace's shortcut for plain ``nn.Linear`` calls (backends/torch/linear_shortcut.py):
FLOPs from shapes with the counter off the dispatch stack. Every count, call by call, and
the coverage note must equal what the counter gives with the shortcut off, and the total
torch's own ``FlopCounterMode``; every case the shortcut must not take runs the counter."""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

import nbinspect
from nbinspect.backends.torch import linear_shortcut
from nbinspect.backends.torch import trace as torch_trace


@pytest.fixture
def taken(monkeypatch):
    """The calls the shortcut took during a test (module paths are not known to it: ids)."""
    seen: list[int] = []
    real = torch_trace.linear_flops

    def spy(module, x, counter):
        per = real(module, x, counter)
        if per:
            seen.append(id(module))
        return per

    monkeypatch.setattr(torch_trace, "linear_flops", spy)
    return seen


def _counts(model, *args, **options):
    insp = nbinspect.trace(model, *args, **options)
    flow = insp.frames["flow"]
    return flow["flops"].tolist(), flow["own_flops"].tolist(), insp.totals["flops"], insp.totals["flops_note"]


def _without_shortcut(monkeypatch, model, *args, **options):
    with monkeypatch.context() as m:
        m.setattr(torch_trace, "plain_linears", lambda modules: set())
        return _counts(model, *args, **options)


def _reference(model, *args) -> int:
    with FlopCounterMode(display=False) as mode:
        model(*args)
    return mode.get_total_flops()


def _inputs(shape: tuple, layout: str, dtype: torch.dtype, grad: bool) -> torch.Tensor:
    gen = torch.Generator().manual_seed(sum(shape))
    if layout == "transposed" and len(shape) >= 2:  # the last two dims swapped: not contiguous
        x = torch.randn(*shape[:-2], shape[-1], shape[-2], generator=gen).transpose(-1, -2)
    elif layout == "strided":  # every other row: not contiguous
        x = torch.randn(*shape[:-1], 2 * shape[-1], generator=gen)[..., ::2]
    else:
        x = torch.randn(*shape, generator=gen)
    return x.to(dtype).requires_grad_(grad and dtype.is_floating_point)


SHAPES = [(5,), (3, 5), (1, 5), (0, 5), (2, 3, 5), (2, 0, 5), (2, 2, 3, 5), (1, 2, 1, 3, 5)]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_counts_equal_the_counter_and_torchs(monkeypatch, taken, bias, layout):
    kinds = [(torch.float32, True), (torch.float32, False), (torch.bfloat16, True), (torch.float64, False)]
    for shape, (dtype, grad) in itertools.product(SHAPES, kinds):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(5, 7, bias=bias), nn.ReLU(), nn.Linear(7, 3, bias=bias)).to(dtype)
        x = _inputs(shape, layout, dtype, grad)
        taken.clear()
        fast = _counts(model, x)
        assert fast == _without_shortcut(monkeypatch, model, x), (shape, dtype, grad)
        assert fast[2] == _reference(model, x), (shape, dtype, grad)
        plain_2d_or_contiguous = len(shape) == 2 or (len(shape) > 2 and x.is_contiguous())
        assert len(taken) == (1 if plain_2d_or_contiguous else 0) + (1 if len(shape) >= 2 else 0), (shape, dtype, grad)


def test_many_sizes_equal_torchs(monkeypatch, taken):
    gen = torch.Generator().manual_seed(1)
    for _ in range(40):
        k, n, m, b = (int(v) for v in torch.randint(1, 33, (4,), generator=gen))
        model = nn.Linear(k, n, bias=bool(m % 2))
        for x in (torch.randn(m, k), torch.randn(b, m, k)):
            fast = _counts(model, x)
            assert fast == _without_shortcut(monkeypatch, model, x)
            assert fast[2] == _reference(model, x) == 2 * x[..., 0].numel() * k * n
    assert taken


class _Sub(nn.Linear):
    pass


class _MyTensor(torch.Tensor):
    pass


class _Logging(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


class _Scaled(TorchFunctionMode):
    """Doubles every linear's input: the model's function mode changes what runs."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is F.linear:
            args = (torch.cat([args[0], args[0]]), *args[1:])
        return func(*args, **(kwargs or {}))


class _ModeInside(nn.Module):
    def __init__(self, mode_type):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.mode_type = mode_type
        self.seen: list = []

    def forward(self, x):
        with self.mode_type() as mode:
            out = self.fc(x)
        self.seen.append(mode)
        return out


def _hooked_pre(model):
    model[0].register_forward_pre_hook(lambda m, args: (args[0] @ torch.eye(8),))
    return model


def _hooked_after(model):
    model[0].register_forward_hook(lambda m, args, out: out @ torch.eye(4))
    return model


def _own_forward(model):
    inner = model[0]
    inner.forward = lambda x: F.linear(x @ torch.eye(8), inner.weight, inner.bias)
    return model


def _subclass_weight(model):
    model[0].weight = nn.Parameter(model[0].weight.detach().as_subclass(_MyTensor))
    return model


FALLBACKS = {
    "subclass": lambda: nn.Sequential(_Sub(8, 4)),
    "forward pre-hook": lambda: _hooked_pre(nn.Sequential(nn.Linear(8, 4))),
    "forward hook": lambda: _hooked_after(nn.Sequential(nn.Linear(8, 4))),
    "own forward": lambda: _own_forward(nn.Sequential(nn.Linear(8, 4))),
    "tensor subclass weight": lambda: _subclass_weight(nn.Sequential(nn.Linear(8, 4))),
}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_unusual_modules_take_the_counter(monkeypatch, taken, case):
    model, x = FALLBACKS[case](), torch.randn(3, 8)
    fast = _counts(model, x)
    assert not taken
    assert fast == _without_shortcut(monkeypatch, model, x)
    assert fast[2] == _reference(model, x) > 0


def test_a_global_hook_takes_the_counter(monkeypatch, taken):
    from torch.nn.modules.module import register_module_forward_hook

    model, x = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 4)), torch.randn(3, 8)
    handle = register_module_forward_hook(
        lambda m, args, out: out @ torch.eye(out.shape[-1]) if m is model[0] else None
    )
    try:
        fast = _counts(model, x)
        assert not taken
        assert fast == _without_shortcut(monkeypatch, model, x)
        assert fast[2] == _reference(model, x) == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 4 + 2 * 3 * 4 * 4
    finally:
        handle.remove()


def test_a_tensor_subclass_input_takes_the_counter(monkeypatch, taken):
    model, x = nn.Sequential(nn.Linear(8, 4)), torch.randn(3, 8).as_subclass(_MyTensor)
    fast = _counts(model, x)
    assert not taken
    assert fast == _without_shortcut(monkeypatch, model, x)
    assert fast[2] == 2 * 3 * 8 * 4


def test_the_models_own_dispatch_mode_sees_the_linear(taken):
    model = _ModeInside(_Logging)
    insp = nbinspect.trace(model, torch.randn(3, 8))
    assert not taken
    assert "addmm" in model.seen[-1].ops
    assert insp.totals["flops"] == 2 * 3 * 8 * 4
    assert torch._C._len_torch_dispatch_stack() == 0


def test_the_models_own_function_mode_still_works(monkeypatch, taken):
    model = _ModeInside(_Scaled)
    insp = nbinspect.trace(model, torch.randn(3, 8))
    assert not taken
    assert insp.layers.set_index("name").loc["fc", "output_shapes"] == [(6, 4)]
    assert insp.totals["flops"] == 2 * 6 * 8 * 4 == _without_shortcut(monkeypatch, model, torch.randn(3, 8))[2]


def test_backward_takes_the_counter(monkeypatch, taken):
    model, x = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(3, 8)
    insp = nbinspect.trace(model, x, backward=True)
    assert not taken
    assert insp.totals["flops"] == _reference(model, x)
    assert insp.totals["backward_flops"] == 2 * 3 * 8 * 4 + 2 * (2 * 3 * 4 * 2)  # no grad for the model's input


def test_the_counter_is_back_after_a_failing_linear(taken):
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc, self.head = nn.Linear(8, 4), nn.Linear(4, 2)

        def forward(self, x):
            with contextlib.suppress(RuntimeError):
                self.fc(torch.zeros(3, 5))  # wrong width: raises inside the shortcut
            return self.head(self.fc(x))

    insp = nbinspect.trace(Bad(), torch.randn(3, 8))
    assert len(taken) == 3
    assert insp.totals["flops"] == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 2
    assert torch._C._len_torch_dispatch_stack() == 0
    assert insp.frames["flow"]["status"].tolist() == ["ok", "failed", "ok", "ok"]


def test_patched_linear_forward_turns_the_shortcut_off(monkeypatch):
    monkeypatch.setattr(nn.Linear, "forward", lambda self, x: F.linear(x, self.weight, self.bias) @ torch.eye(4))
    assert linear_shortcut.plain_linears([nn.Linear(8, 4)]) == set()
    model, x = nn.Sequential(nn.Linear(8, 4)), torch.randn(3, 8)
    assert _counts(model, x)[2] == _reference(model, x) == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 4


class _Swapped(nn.Module):
    """Takes the trace's counter off the stack and runs its Linear under a mode of its own."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.seen: list = []

    def forward(self, x):
        from torch.utils._python_dispatch import _pop_mode_temporarily

        with _pop_mode_temporarily(), _Logging() as mode:
            out = self.fc(x)
        self.seen.append(mode)
        return out


def test_a_mode_the_model_swapped_in_for_the_counter_stays(taken):
    model = _Swapped()
    nbinspect.trace(model, torch.randn(3, 8))
    assert not taken
    assert "addmm" in model.seen[-1].ops
    assert torch._C._len_torch_dispatch_stack() == 0
