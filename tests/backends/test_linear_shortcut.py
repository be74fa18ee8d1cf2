"""The trace's shortcut for plain ``nn.Linear`` calls (backends/torch/linear_shortcut.py):
the trace runs the call itself, FLOPs from shapes with the counter off the dispatch stack
and the saved tensors handed to the meter with its hooks quiet. Every count, call by call
(FLOPs and saved bytes), the totals and the coverage note must equal what the counter and
the meter give with the shortcut off, the FLOP total torch's own ``FlopCounterMode``; every
case the shortcut must not take runs torch's way; torch's stacks are left as found."""

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
from nbinspect.errors import TraceError


@pytest.fixture
def taken(monkeypatch):
    """The calls the shortcut ran during a test (module paths are not known to it: ids)."""
    seen: list[int] = []
    real = torch_trace.linear_call

    def spy_call(*args):
        run = real(*args)
        if run is None:
            return None

        def spy(module, x, call):
            output = run(module, x, call)
            if output is not None:
                seen.append(id(module))
            return output

        return spy

    monkeypatch.setattr(torch_trace, "linear_call", spy_call)
    return seen


def _stacks():
    """torch's mode stacks, saved-tensor hooks (top) and their quiet flag, to compare before and after."""
    quiet = torch._C._autograd._saved_tensors_hooks_set_tracing(False)
    torch._C._autograd._saved_tensors_hooks_set_tracing(quiet)
    return (
        torch._C._len_torch_dispatch_stack(),
        torch._C._len_torch_function_stack(),
        torch._C._autograd._top_saved_tensors_default_hooks(True),
        quiet,
    )


def _counts(model, *args, **options):
    """Per call FLOPs and saved bytes (own and with the calls inside), statuses, and the totals."""
    before = _stacks()
    try:
        insp = nbinspect.trace(model, *args, **options)
    finally:
        assert _stacks() == before
    flow, totals = insp.frames["flow"], insp.totals
    columns = ["flops", "own_flops", "activation_bytes", "own_activation_bytes", "status"]
    return (
        [flow[c].tolist() for c in columns],
        totals["flops"],
        totals["activation_bytes"],
        totals["flops_note"],
    )


def _without_shortcut(monkeypatch, model, *args, **options):
    with monkeypatch.context() as m:
        m.setattr(torch_trace, "plain_linears", lambda modules: set())
        return _counts(model, *args, **options)


def _same(monkeypatch, model, *args, **options):
    """The counts with the shortcut, checked equal to those without it."""
    fast = _counts(model, *args, **options)
    assert fast == _without_shortcut(monkeypatch, model, *args, **options)
    return fast


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
        assert fast[1] == _reference(model, x), (shape, dtype, grad)
        plain_2d_or_contiguous = len(shape) == 2 or (len(shape) > 2 and x.is_contiguous())
        assert len(taken) == (1 if plain_2d_or_contiguous else 0) + (1 if len(shape) >= 2 else 0), (shape, dtype, grad)


def test_many_sizes_equal_torchs(monkeypatch, taken):
    gen = torch.Generator().manual_seed(1)
    for _ in range(40):
        k, n, m, b = (int(v) for v in torch.randint(1, 33, (4,), generator=gen))
        model = nn.Linear(k, n, bias=bool(m % 2))
        for x in (torch.randn(m, k), torch.randn(b, m, k)):
            fast = _same(monkeypatch, model, x)
            assert fast[1] == _reference(model, x) == 2 * x[..., 0].numel() * k * n
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
    fast = _same(monkeypatch, model, x)
    assert not taken
    assert fast[1] == _reference(model, x) > 0


def test_a_global_hook_takes_the_counter(monkeypatch, taken):
    from torch.nn.modules.module import register_module_forward_hook

    model, x = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 4)), torch.randn(3, 8)
    handle = register_module_forward_hook(
        lambda m, args, out: out @ torch.eye(out.shape[-1]) if m is model[0] else None
    )
    try:
        fast = _same(monkeypatch, model, x)
        assert not taken
        assert fast[1] == _reference(model, x) == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 4 + 2 * 3 * 4 * 4
    finally:
        handle.remove()


def test_a_tensor_subclass_input_takes_the_counter(monkeypatch, taken):
    model, x = nn.Sequential(nn.Linear(8, 4)), torch.randn(3, 8).as_subclass(_MyTensor)
    fast = _same(monkeypatch, model, x)
    assert not taken
    assert fast[1] == 2 * 3 * 8 * 4


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
    assert insp.totals["flops"] == 2 * 6 * 8 * 4 == _without_shortcut(monkeypatch, model, torch.randn(3, 8))[1]


def test_backward_takes_the_counter(monkeypatch, taken):
    model, x = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2)), torch.randn(3, 8)
    insp = nbinspect.trace(model, x, backward=True)
    assert not taken
    assert insp.totals["flops"] == _reference(model, x)
    assert insp.totals["backward_flops"] == 2 * 3 * 8 * 4 + 2 * (2 * 3 * 4 * 2)  # no grad for the model's input


class _Bad(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.head = nn.Linear(8, 4), nn.Linear(4, 2)

    def forward(self, x):
        # kept alive: the meter knows storages by address, and a freed one's may come back
        wrong = torch.zeros(3, 5, requires_grad=True)
        with contextlib.suppress(RuntimeError):
            self.fc(wrong)  # wrong width: raises in the shortcut's call
        return self.head(self.fc(x))


def test_a_failing_linear_runs_again_torchs_way(monkeypatch, taken):
    """autograd saves both matrices before addmm checks their shapes: the meter counts them
    on the failed call, and the counter is back on the stack for the calls after."""
    fast = _same(monkeypatch, _Bad(), torch.randn(3, 8))
    assert len(taken) == 2  # the failing call ran torch's way
    assert fast[1] == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 2
    assert fast[0][4] == ["ok", "failed", "ok", "ok"]
    assert fast[0][3][1:] == [3 * 5 * 4, 0, 3 * 4 * 4]  # the failed call's input, saved before the error


def test_patched_linear_forward_turns_the_shortcut_off(monkeypatch):
    monkeypatch.setattr(nn.Linear, "forward", lambda self, x: F.linear(x, self.weight, self.bias) @ torch.eye(4))
    assert linear_shortcut.plain_linears([nn.Linear(8, 4)]) == set()
    model, x = nn.Sequential(nn.Linear(8, 4)), torch.randn(3, 8)
    assert _counts(model, x)[1] == _reference(model, x) == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 4


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


# --- saved tensors ----------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("frozen", [(), (0,), (1,), (0, 1, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_saved_bytes_equal_the_meters(monkeypatch, taken, bias, frozen, dtype):
    """Linear after Linear: the second saves the first's output (its input) when its weight
    requires grad, and its weight (a parameter: not counted) when that input requires grad,
    which it does unless nothing before it does."""
    for shape, layout, grad in itertools.product(SHAPES[1:], ["contiguous", "transposed"], [False, True]):
        torch.manual_seed(0)
        model = nn.Sequential(
            nn.Linear(5, 7, bias=bias), nn.Linear(7, 6, bias=bias), nn.ReLU(), nn.Linear(6, 3, bias=bias)
        ).to(dtype)
        for i in frozen:
            model[i].weight.requires_grad_(False)
        x = _inputs(shape, layout, dtype, grad)
        taken.clear()
        fast = _same(monkeypatch, model, x)
        assert fast[1] == _reference(model, x), (shape, layout, grad)
        assert len(taken) == (2 if len(shape) == 2 or x.is_contiguous() else 1) + 1, (shape, layout, grad)


def test_saved_bytes_by_hand(taken):
    """Linear(8, 16) then Linear(16, 4) on [3, 8]: the second saves the first's output (3·16
    elements) for its weight's gradient; the model's input and the weights are not activations."""
    for dtype, size in [(torch.float32, 4), (torch.bfloat16, 2), (torch.float64, 8)]:
        model = nn.Sequential(nn.Linear(8, 16), nn.Linear(16, 4)).to(dtype)
        (_, _, _, own, _), _, total, _ = _counts(model, torch.randn(3, 8, dtype=dtype))
        assert own == [0, 0, 3 * 16 * size] and total == 3 * 16 * size
    assert len(taken) == 6


class _Parent(nn.Module):
    """A Linear (`pre`) whose output requires grad, then `body` with more Linears."""

    def __init__(self, body):
        super().__init__()
        self.pre, self.fc, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 4), nn.Linear(8, 4)
        self.body = body

    def forward(self, x):
        return self.body(self, self.pre(x))


def _twice(self, h):  # the same input twice to one Linear and once to another: one storage
    return self.fc(h) + self.fc(h) + self.fc2(h)


def _slice(self, h):  # rows of h: a view, saved as h's whole storage
    return self.fc(h[1:3]) + self.fc2(h[:2])


def _no_grad(self, h):
    with torch.no_grad():
        a = self.fc(h)
    return a + self.fc2(h)


def _inference(self, h):
    with torch.inference_mode():
        a = self.fc(h.detach())
    return a.clone() + self.fc2(h)


def _autocast(self, h):  # the weight cast to bfloat16: a new storage, saved
    with torch.autocast("cpu", dtype=torch.bfloat16):
        a = self.fc(h)
    return a.float() + self.fc2(h)


def _own_hooks(self, h):  # the model's own pack hook sees the Linear's saved tensors
    self.packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: self.packed.append(t.shape) or t, lambda t: t):
        a = self.fc(h)
    assert len(self.packed) == 2
    return a + self.fc2(h)


def _checkpointed(self, h):
    from torch.utils.checkpoint import checkpoint

    return checkpoint(self.fc, h, use_reentrant=False) + self.fc2(h)


def _new_weight(self, h):  # a new Parameter: its storage is not the model's, so it is counted
    self.fc.weight = nn.Parameter(self.fc.weight.detach() * 2)
    return self.fc(h) + self.fc2(h)


def _frozen_now(self, h):
    self.fc.weight.requires_grad_(False)
    try:
        return self.fc(h) + self.fc2(h.detach())
    finally:
        self.fc.weight.requires_grad_(True)


def _tied(self, h):
    self.fc2.weight = self.fc.weight
    return self.fc(h) + self.fc2(h * 2)


def _vmapped(self, h):
    return torch.vmap(self.fc)(h.unsqueeze(0).expand(2, -1, -1)).sum(0) + self.fc2(h)


def _dual(self, h):
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        a = fwAD.unpack_dual(self.fc(fwAD.make_dual(h, torch.ones_like(h)))).primal
    return a + self.fc2(h)


def _jvp(self, h):
    return torch.func.jvp(self.fc, (h,), (torch.ones_like(h),))[0] + self.fc2(h)


def _functional(self, h):  # torch.func.functional_call puts plain tensors in _parameters
    params = {k: v.detach() * 2 for k, v in self.fc.named_parameters()}
    return torch.func.functional_call(self.fc, params, (h,)) + self.fc2(h)


BODIES = {
    f.__name__.strip("_"): f
    for f in (
        _twice,
        _slice,
        _no_grad,
        _inference,
        _autocast,
        _own_hooks,
        _checkpointed,
        _new_weight,
        _frozen_now,
        _tied,
        _vmapped,
        _dual,
        _jvp,
        _functional,
    )
}
# the calls of fc/fc2 that run torch's way in each case (pre always takes the shortcut)
TORCHS_WAY = {"autocast": 1, "own_hooks": 1, "checkpointed": 1, "vmapped": 1, "dual": 1, "jvp": 1, "functional": 1}


@pytest.mark.parametrize("case", sorted(BODIES))
@pytest.mark.parametrize("grad", [False, True])
def test_calls_inside_a_parents_forward(monkeypatch, taken, case, grad):
    torch.manual_seed(0)
    model, x = _Parent(BODIES[case]), torch.randn(3, 8, requires_grad=grad)
    fast = _same(monkeypatch, model, x)
    calls = len(fast[0][0]) - 1  # without the root
    assert len(taken) == calls - TORCHS_WAY.get(case, 0), case
    if case == "twice":  # h saved once, at fc's first call: 3·8 floats
        assert fast[0][3] == [0, 0, 3 * 8 * 4, 0, 0]
    if case == "new_weight":  # h and the new weight (8·4... 4·8 floats) at fc's call
        assert fast[0][3][2] == 3 * 8 * 4 + 4 * 8 * 4
    if case in ("no_grad", "inference"):  # fc saved nothing; fc2 saved h
        assert fast[0][3][2:] == [0, 3 * 8 * 4]


def test_inside_the_users_own_hooks_and_modes(monkeypatch, taken):
    """Under hooks and a dispatch mode of the caller's: the trace's own on top of them, the
    shortcut taken only where its checks allow, and the caller's left as they were."""
    model, x = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 2)), torch.randn(3, 8)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        fast = _same(monkeypatch, model, x)
        assert len(taken) == 2
        assert fast[0][3] == [0, 0, 3 * 4 * 4]
    taken.clear()
    with _Logging() as mode:
        assert _same(monkeypatch, model, x) == fast
    assert not taken  # the caller's mode under the counter sees every op
    assert "addmm" in mode.ops


@pytest.mark.parametrize("flops", [True, False])
def test_a_trace_inside_a_watch_block_runs_torchs_way(monkeypatch, taken, flops):
    """The watch's stand-in for Module.__call__ is under the trace's: it must see each call
    (without FLOPs the watch has no counter on the stack, and only that tells)."""
    from nbinspect.backends.torch.watch import watch

    model, x = nn.Sequential(nn.Linear(8, 4), nn.Linear(4, 2)), torch.randn(3, 8)
    with watch(model, flops=flops) as watched:
        fast = _same(monkeypatch, model, x)
    assert not taken
    assert len(watched.calls) == 2 * 3
    assert fast[1] == 2 * 3 * 8 * 4 + 2 * 3 * 4 * 2


class _FailsLater(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc, self.head = nn.Linear(8, 4), nn.Linear(width, 2)

    def forward(self, x):
        h = self.fc(x)
        if self.head.in_features == 4:
            raise ValueError("the model's own error")
        return self.head(h)


@pytest.mark.parametrize("width", [4, 5])
def test_a_failing_model_leaves_torchs_stacks_as_found(monkeypatch, taken, width):
    """Raised by the model after a Linear ran, or by a Linear itself: nothing of the trace's
    stays on torch's stacks, and a plain forward and backward work after it."""
    model, x = _FailsLater(width), torch.randn(3, 8, requires_grad=True)
    before = _stacks()
    for shortcut in (True, False):
        with monkeypatch.context() as m:
            if not shortcut:
                m.setattr(torch_trace, "plain_linears", lambda modules: set())
            with pytest.raises(TraceError) as info:
                nbinspect.trace(model, x)
        assert _stacks() == before
        assert ("own error" in str(info.value)) == (width == 4)
    assert taken == [id(model.fc)]
    model.head = nn.Linear(4, 2)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        torch.nn.Sequential(model.fc, model.head)(x).sum().backward()
    assert x.grad is not None and model.fc.weight.grad is not None
    assert _stacks() == before
