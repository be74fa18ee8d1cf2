"""The trace leaves the model as it found it, also when the forward pass raises, and a
failure names the module and the inputs it got."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.modules import module as module_globals

import nbinspect
from nbinspect import examples
from nbinspect.backends.torch import preserve
from nbinspect.backends.torch import trace as trace_backend
from nbinspect.core.trace import NAME

from ..conftest import assert_unchanged, model_state

_MODULE_CALL = nn.Module.__call__  # torch's own, as imported


def _no_global_hooks():
    """torch's global hook tables are empty and ``Module.__call__`` is torch's again."""
    return nn.Module.__call__ is _MODULE_CALL and not (
        module_globals._global_forward_hooks
        or module_globals._global_forward_pre_hooks
        or module_globals._global_forward_hooks_with_kwargs
        or module_globals._global_forward_hooks_always_called
    )


@pytest.mark.parametrize("train", [True, False])
def test_zoo_unchanged(zoo_name, train):
    model = examples.build(zoo_name).train(train)
    x = examples.example_input(zoo_name)
    before = model_state(model)
    nbinspect.trace(model, x, backward=True)
    assert_unchanged(before, model_state(model))
    assert _no_global_hooks()


def test_batchnorm_stats_and_rng_unchanged_in_train_mode():
    model = examples.build("cnn").train()
    bn = model.features[1]
    mean, var, tracked = bn.running_mean.clone(), bn.running_var.clone(), bn.num_batches_tracked.item()
    rng = torch.get_rng_state()
    nbinspect.trace(model, examples.example_input("cnn"))
    assert torch.equal(bn.running_mean, mean) and torch.equal(bn.running_var, var)
    assert bn.num_batches_tracked.item() == tracked
    assert torch.equal(torch.get_rng_state(), rng)  # Dropout drew from a fork
    # and the trace did see train-mode behaviour: dropout saved a mask
    assert "bernoulli_" in nbinspect.trace(model, examples.example_input("cnn")).totals["flops_note"]


def test_parameters_are_the_same_objects_on_the_same_device():
    model = examples.build("tiny_lm")
    before = dict(model.named_parameters())
    nbinspect.trace(model, examples.example_input("tiny_lm"), backward=True)
    after = dict(model.named_parameters())
    assert all(after[name] is p and p.device.type == "cpu" for name, p in before.items())
    assert all(p.grad is None for p in model.parameters())


def test_a_tensor_cached_over_another_value_is_taken_back():
    """A forward pass that stores its output in an attribute that held None (a cache) must
    not leave the traced, graph-holding tensor on the model."""

    class Cached(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)
            self.cache = None
            self.count = 0

        def forward(self, x):
            self.cache = self.linear(x)
            self.count += 1  # not a tensor: the model's own bookkeeping, left as it ran
            return self.cache

    model = Cached()
    before = model_state(model)
    nbinspect.trace(model, (2, 4))
    assert model.cache is None and model.count == 1
    assert_unchanged(before, model_state(model))


def test_a_cached_tensor_of_equal_value_is_taken_back():
    """A forward pass that replaces a one-element tensor attribute by a new tensor of the
    same value: equal by ``==``, but a different object that holds the trace's graph."""

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)
            self.scale = torch.ones(1)

        def forward(self, x):
            self.scale = self.linear.bias.sum() * 0 + 1  # equal to the old value, with a grad_fn
            return self.linear(x) * self.scale

    model = Scaled()
    scale = model.scale
    nbinspect.trace(model, (2, 4))
    assert model.scale is scale and model.scale.grad_fn is None


def test_recorded_output_is_what_the_caller_gets_after_the_modules_own_hook():
    """A module's own forward hook that replaces its output: the flow shows the output the
    next module receives, and the trace leaves the hook in place."""
    model = nn.Sequential(nn.Linear(4, 6), nn.Linear(3, 2))
    model[0].register_forward_hook(lambda m, args, out: out[:, :3])
    insp = nbinspect.trace(model, (2, 4))
    rows = insp.flow.set_index("name")
    assert tuple(rows.loc["0", "output_shapes"][0]) == (2, 3)
    assert tuple(rows.loc["1", "input_shapes"][0]) == (2, 3)
    assert len(model[0]._forward_hooks) == 1 and _no_global_hooks()


def test_recorders_detached_out_of_order_leave_the_others_working():
    """Two recorders attached at once (a trace inside a watched block, or two threads):
    detaching the first keeps the second recording, and the last detach puts torch's
    ``Module.__call__`` back."""
    from nbinspect.backends.torch.trace import TorchRecorder as Recorder
    from nbinspect.backends.torch.trace import named_modules_of

    model, x = nn.Sequential(nn.Linear(4, 4), nn.ReLU()), torch.ones(1, 4)
    first, second = Recorder(named_modules_of(model)), Recorder(named_modules_of(model))
    first.attach()
    second.attach()
    model(x)
    first.detach()
    model(x)
    assert [c[NAME] for c in first.calls] == ["", "0", "1"]  # rows (core.trace.ROW)
    assert [c[NAME] for c in second.calls] == ["", "0", "1"] * 2
    assert nn.Module.__call__ is not _MODULE_CALL
    second.detach()
    assert _no_global_hooks()


def test_a_stand_in_put_back_by_another_patch_records_nothing_after_detach():
    """Another library patches Module.__call__ while a recorder is attached and restores
    what it saw after the recorder detached: that stale stand-in must let calls through."""
    from nbinspect.backends.torch.trace import TorchRecorder as Recorder
    from nbinspect.backends.torch.trace import named_modules_of

    model, x = nn.Sequential(nn.Linear(4, 4)), torch.ones(1, 4)
    recorder = Recorder(named_modules_of(model))
    recorder.attach()
    seen_by_other = nn.Module.__call__  # the other library's patch keeps ours to restore it
    recorder.detach()
    try:
        nn.Module.__call__ = seen_by_other  # ... and puts it back when it is done
        out = model(x)
        assert recorder.calls == [] and torch.equal(out, model[0](x))
    finally:
        nn.Module.__call__ = _MODULE_CALL
    assert _no_global_hooks()


def test_existing_user_hooks_survive():
    model = examples.build("mlp")
    seen = []
    handle = model.head.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    nbinspect.trace(model, examples.example_input("mlp"))
    assert seen == [(4, 10)]
    assert len(model.head._forward_hooks) == 1
    handle.remove()


class _Broken(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(64, 64)

    def forward(self, x, scale=None):
        raise ValueError("boom")


def _failing_lm():
    model = examples.build("tiny_lm").train()
    model.blocks[1].attn = _Broken()
    return model


def test_failure_names_the_module_and_its_inputs():
    model = _failing_lm()
    before = model_state(model)
    bn_free_buffers = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(nbinspect.TraceError) as info:
        nbinspect.trace(model, examples.example_input("tiny_lm"))
    message = str(info.value)
    assert message.startswith("forward failed in blocks.1.attn (_Broken) with inputs [2, 16, 64]: ValueError: boom")
    assert isinstance(info.value.__cause__, ValueError)
    assert_unchanged(before, model_state(model))
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in bn_free_buffers.items())
    assert _no_global_hooks()


def test_failure_keeps_the_partial_trace():
    with pytest.raises(nbinspect.TraceError) as info:
        nbinspect.trace(_failing_lm(), examples.example_input("tiny_lm"))
    partial = info.value.partial
    flow = partial.frames["flow"]
    assert list(flow[flow["status"] != "ok"]["name"]) == ["", "blocks.1", "blocks.1.attn"]
    assert list(flow[flow["status"] != "ok"]["status"]) == ["interrupted", "interrupted", "failed"]
    done = flow[flow["status"] == "ok"]
    assert "blocks.0.mlp.2" in set(done["name"]) and "lm_head" not in set(flow["name"])
    layers = partial.layers.set_index("name")
    assert layers.loc["blocks.0", "output_shapes"] == [(2, 16, 64)]
    assert "FAILED" in str(partial.flow)


def test_failure_shows_keyword_inputs():
    class Caller(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _Broken()

        def forward(self, x):
            return self.inner(x, scale=torch.ones(3))

    with pytest.raises(nbinspect.TraceError, match=r"in inner \(_Broken\) with inputs \[2, 64\] \[3\]:"):
        nbinspect.trace(Caller(), (2, 64))


def test_failure_in_batchnorm_model_restores_running_stats():
    """The stats are updated by BatchNorm before a later layer fails; they are put back."""
    model = examples.build("cnn").train()
    model.classifier[2] = _Broken()
    bn = model.features[1]
    mean, tracked = bn.running_mean.clone(), bn.num_batches_tracked.clone()
    with pytest.raises(nbinspect.TraceError, match=r"classifier.2 \(_Broken\) with inputs \[2, 16\]"):
        nbinspect.trace(model, examples.example_input("cnn"))
    assert torch.equal(bn.running_mean, mean) and torch.equal(bn.num_batches_tracked, tracked)


def test_exception_caught_inside_the_model():
    class Tolerant(nn.Module):
        def __init__(self):
            super().__init__()
            self.bad = _Broken()
            self.good = nn.Linear(64, 2)

        def forward(self, x):
            with contextlib.suppress(ValueError):
                self.bad(x)
            return self.good(x)

    insp = nbinspect.trace(Tolerant(), (3, 64))
    flow = insp.frames["flow"]
    assert list(zip(flow["name"], flow["status"], flow["depth"])) == [
        ("", "ok", 0),
        ("bad", "failed", 1),
        ("good", "ok", 1),
    ]


def test_failure_before_any_module():
    class Picky(nn.Module):
        def forward(self, x):
            return x

    model = Picky()
    model.register_forward_pre_hook(lambda m, args: (_ for _ in ()).throw(KeyError("hook")))
    with pytest.raises(nbinspect.TraceError, match="Picky"):
        nbinspect.trace(model, (2, 2))
    assert _no_global_hooks()


def _identity_state(modules: list[nn.Module]) -> list:
    """What `preserved` must give back, straightforwardly: each module's train flag and its
    tensor attributes as (key, object) pairs, its buffers as (name, object, values)."""
    return [
        (
            m.training,
            sorted((k, id(v)) for k, v in vars(m).items() if isinstance(v, torch.Tensor)),
            [(name, id(b), b.clone()) for name, b in m._buffers.items() if b is not None],
        )
        for m in modules
    ]


def _same_state(before: list, after: list) -> bool:
    return all(
        tb == ta
        and ab == aa
        and [(n, i) for n, i, _ in bb] == [(n, i) for n, i, _ in ba]
        and all(torch.equal(x, y) for (_, _, x), (_, _, y) in zip(bb, ba))
        for (tb, ab, bb), (ta, aa, ba) in zip(before, after)
    )


def _random_change(rng, modules: list[nn.Module]) -> None:
    """One change of the kinds a forward pass makes, on a module picked at random."""
    m = modules[int(rng.integers(len(modules)))]
    tensors = [k for k, v in vars(m).items() if isinstance(v, torch.Tensor)]
    kind = int(rng.integers(10))
    if kind == 0:  # a new tensor attribute
        m.__dict__[f"new{int(rng.integers(1000))}"] = torch.zeros(2)
    elif kind == 1 and tensors:  # replaced by an equal-valued, different object (one and several elements)
        k = tensors[int(rng.integers(len(tensors)))]
        m.__dict__[k] = m.__dict__[k].clone()
    elif kind == 2 and tensors:  # deleted
        del m.__dict__[tensors[int(rng.integers(len(tensors)))]]
    elif kind == 3:
        m.training = not m.training
    elif kind == 4 and m._buffers:  # a buffer changed in place, or replaced
        name = next(iter(m._buffers))
        if rng.integers(2):
            m._buffers[name].add_(1)
        else:
            m._buffers[name] = m._buffers[name].clone()
    elif kind == 5:  # a cache that held None (or a number) now holds a tensor
        m.__dict__["cache"] = torch.ones(())
    elif kind == 6:  # not a tensor: left as the forward set it, nothing to restore
        m.__dict__["count"] = m.__dict__.get("count", 0) + 1
    elif kind == 7:
        torch.rand(3)  # the RNG moves
    elif kind == 8 and tensors:  # a tensor attribute renamed: same object, other key
        k = tensors[int(rng.integers(len(tensors)))]
        m.__dict__[f"{k}_renamed"] = m.__dict__.pop(k)
    elif kind == 9:  # an equal int, another object: no tensor, nothing to restore
        m.__dict__["size"] = int(str(m.__dict__.get("size", 10**20)))


def _random_model(rng) -> list[nn.Module]:
    """The modules of a random model, each once (the root first)."""
    shared = nn.BatchNorm1d(2)
    layers = []
    for i in range(40):
        m = nn.BatchNorm1d(2) if i % 7 == 0 else nn.Linear(2, 2)
        if rng.integers(3) == 0:  # tensors in __dict__ before the trace (one and several elements)
            m.scale, m.mask = torch.ones(1), torch.ones(3)
        m.cache, m.size = None, 10**20
        layers.append(m)
    model = nn.Sequential(*layers, shared, nn.Sequential(shared))  # one module at two paths
    return [m for _, m in trace_backend.named_modules_of(model)]


@pytest.mark.parametrize("fails", [False, True])
def test_preserved_against_the_straightforward_check(fails):
    """Random changes at random places (many modules; equal-valued replacements, renames,
    tensors in __dict__ before): `preserved` gives back every train flag, tensor attribute
    and buffer as the same objects with the same values, on success and on failure; its
    fast test says unchanged whenever the old identity check did, and only where no
    restorable value (a tensor, a train flag) is another object."""
    rng = np.random.default_rng(0)
    kinds = set()
    for trial in range(200):
        modules = _random_model(rng)
        before, rng_state = _identity_state(modules), torch.get_rng_state()
        dicts = [dict(vars(m)) for m in modules]
        changes = int(rng.integers(3))  # none in a third of the trials
        with (
            contextlib.suppress(KeyError),
            preserve.preserved(modules, trace_backend.tensors_of(modules), None, real=True),
        ):
            for _ in range(changes):
                _random_change(rng, modules)
            now = [dict(vars(m)) for m in modules]
            fast = preserve._unchanged(dicts, list(map(vars, modules)))
            if fails:
                raise KeyError("the forward failed")
        # the old check: every key, every value the same object
        old = all(d.keys() == n.keys() and all(d[k] is n[k] for k in d) for d, n in zip(dicts, now))
        restorable = all(
            all(
                d.get(k) is n.get(k)
                for k in d.keys() | n.keys()
                if k == "training" or isinstance(d.get(k), torch.Tensor) or isinstance(n.get(k), torch.Tensor)
            )
            for d, n in zip(dicts, now)
        )
        assert (not old or fast) and (not fast or restorable), trial  # fast: no restorable value is another object
        kinds.add((old, fast))
        assert _same_state(before, _identity_state(modules)), trial
        assert torch.equal(torch.get_rng_state(), rng_state), trial
    assert kinds == {(True, True), (False, True), (False, False)}  # an equal int passes, as it may


def test_unchanged_never_compares_tensor_values():
    """An equal-valued tensor (on the CPU, on meta, a parameter) is another object: a change,
    found without running a kernel; with torch functions disabled the fast test defers to
    the one-module-at-a-time check; the mode stack is left as it was."""
    for make in (lambda: torch.ones(1), lambda: torch.ones(4, device="meta"), lambda: nn.Parameter(torch.ones(1))):
        a = make()
        depth = torch._C._len_torch_function_stack()
        assert preserve._unchanged([{"t": a}], [{"t": a}])
        assert not preserve._unchanged([{"t": a}], [{"t": make()}])
        assert not preserve._unchanged([{"t": 1}], [{"t": torch.ones(())}])
        assert not preserve._unchanged([{"t": None}], [{"t": a}])
        assert torch._C._len_torch_function_stack() == depth
    with torch._C.DisableTorchFunction():
        assert not preserve._unchanged([{"t": a}], [{"t": make()}])
