"""inspect_while (the magic's path with a memory plan): the weight statistics read on a thread
of their own while the plan runs, the real trace after both. Everything equals the
sequential path (inspect, then memory), the model is left as it was, and a failure on
either side is the one error the sequential path raised, with no thread left behind."""

from __future__ import annotations

import functools
import threading
import time

import pandas as pd
import pytest
import torch
import transformers as T
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from torch._subclasses.fake_tensor import FakeTensor

import nbinspect
from nbinspect import examples, pipeline
from nbinspect.backends import as_source
from nbinspect.inspection import inspect_while

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
MODELS = {
    "gpt2": (lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=100)), (2, 8)),
    "llama": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**TINY, vocab_size=100, num_key_value_heads=1)), (2, 8)),
    "cnn": (lambda: examples.build("cnn"), (2, 3, 32, 32)),  # BatchNorm: running stats change in train mode
}
PLAN = {"batch_size": 4, "optimizer": "adamw"}


def _input(model: torch.nn.Module, shape: tuple) -> dict:
    return {"input": shape, "input_dtype": torch.int64 if len(shape) == 2 else None}


def _state(model: torch.nn.Module) -> dict[str, bytes]:
    """Every parameter and buffer as bytes (a write anywhere shows)."""
    return {k: v.detach().reshape(-1).view(torch.uint8).numpy().tobytes() for k, v in model.state_dict().items()}


@pytest.fixture
def stats_beside_the_plan(monkeypatch):
    """arm(model), from then on: the statistics wait until the plan's fake forward of `model` has begun
    (fakes swapped into it, FakeTensorMode on the plan's thread), which waits until they are
    done: they are read exactly while the plan runs. Returns the threads they ran on and arm."""
    in_plan, read = threading.Event(), threading.Event()
    threads: list[str] = []
    real = pipeline.stats_frames

    def stats_frames(*args, **kwargs):
        threads.append(threading.current_thread().name)
        assert in_plan.wait(10), "the statistics were not read while the plan ran"
        try:
            return real(*args, **kwargs)
        finally:
            read.set()

    def arm(model: torch.nn.Module):
        def hold_the_plan(module, args, kwargs):
            if any(isinstance(a, FakeTensor) for a in [*args, *kwargs.values()]):
                handle.remove()  # once: the real trace after it sees no hook
                in_plan.set()
                assert read.wait(10)

        monkeypatch.setattr(pipeline, "stats_frames", stats_frames)
        handle = model.register_forward_pre_hook(hold_the_plan, with_kwargs=True)
        return handle

    return threads, arm


@pytest.mark.parametrize("name", list(MODELS))
def test_frames_equal_the_sequential_path_in_train_mode(name, stats_beside_the_plan):
    build, shape = MODELS[name]
    torch.manual_seed(0)
    model = build().train()
    options = _input(model, shape)
    source = as_source(model)
    before = _state(model)
    inspected = nbinspect.inspect(source, **options)
    planned = nbinspect.memory(source, **options, **PLAN)
    threads, arm = stats_beside_the_plan
    handle = arm(model)
    try:
        overlapped, plan = inspect_while(
            source, functools.partial(nbinspect.memory, source, **options, **PLAN), **options
        )
    finally:
        handle.remove()
    assert threads == ["nbinspect-stats_0"]  # on a thread of their own, held inside the plan's forward
    assert list(overlapped.frames) == list(inspected.frames)
    for key, frame in inspected.frames.items():
        pd.testing.assert_frame_equal(overlapped.frames[key], frame, obj=key)
    assert dict(overlapped.totals) == dict(inspected.totals) and dict(overlapped.io) == dict(inspected.io)
    pd.testing.assert_frame_equal(pd.DataFrame(plan), pd.DataFrame(planned))
    assert _state(model) == before and model.training


def test_the_model_is_left_as_it_was(stats_beside_the_plan):
    build, shape = MODELS["cnn"]
    model = build().train()
    params = {k: id(p) for k, p in model.named_parameters()}
    before = _state(model)
    options = _input(model, shape)
    _, arm = stats_beside_the_plan
    handle = arm(model)
    try:
        inspect_while(model, functools.partial(nbinspect.memory, model, **options, **PLAN), **options)
    finally:
        handle.remove()
    assert _state(model) == before  # running stats and num_batches_tracked included
    assert {k: id(p) for k, p in model.named_parameters()} == params
    assert all(m.training for m in model.modules())


@pytest.fixture
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbinspect")
    shell.user_ns["net"] = examples.build("cnn").train()
    nbinspect.inspect(shell.user_ns["net"])  # pools nbinspect keeps for the session already exist
    yield shell
    InteractiveShell.clear_instance()


LINE = "net --input-shape 2,3,32,32 --batch-size 4 --optimizer adamw --text"


def _threads_left(before: set[threading.Thread]) -> list[str]:
    return [t.name for t in threading.enumerate() if t not in before]


def test_a_failing_statistics_read_is_one_line_and_leaves_no_thread(ip, monkeypatch):
    where: list[str] = []

    def failing(*args, **kwargs):
        where.append(threading.current_thread().name)
        time.sleep(0.2)  # still reading when the plan is done
        raise OSError("the weights' file went away\nsecond line")

    monkeypatch.setattr(pipeline, "stats_frames", failing)
    before = set(threading.enumerate())
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("inspect_model", LINE)
    assert where == ["nbinspect-stats_0"]
    assert "\n" not in str(info.value) and "the weights' file went away" in str(info.value)
    assert _threads_left(before) == []


def test_a_failing_plan_waits_for_the_statistics_and_leaves_no_thread(ip, monkeypatch):
    ended: list[bool] = []
    real = pipeline.stats_frames

    def slow(*args, **kwargs):
        time.sleep(0.3)  # still reading when the plan fails
        result = real(*args, **kwargs)
        ended.append(True)
        return result

    def failing_plan(*args, **kwargs):
        raise ValueError("the plan failed\nsecond line")

    monkeypatch.setattr(pipeline, "stats_frames", slow)
    monkeypatch.setattr(nbinspect.inspection, "memory", failing_plan)
    before = set(threading.enumerate())
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("inspect_model", LINE)
    assert ended == [True]  # the magic raised only once the statistics had ended
    assert "\n" not in str(info.value) and "the plan failed" in str(info.value)
    assert _threads_left(before) == []


def test_a_failing_forward_names_the_real_run_as_without_a_plan(ip):
    """The plan's fake forward fails first, but the error is the real trace's, as when the
    plan ran after it: the user's own input shape, not the planned batch."""
    with pytest.raises(UsageError) as plain:
        ip.run_line_magic("inspect_model", "net --input-shape 2,4,32,32 --text")
    with pytest.raises(UsageError) as planned:
        ip.run_line_magic("inspect_model", "net --input-shape 2,4,32,32 --batch-size 4 --text")
    assert str(planned.value) == str(plain.value) and "[2, 4, 32, 32]" in str(plain.value)


def test_an_interrupted_plan_stops_the_statistics_and_leaves_no_thread(monkeypatch, calls):
    """Ctrl-C during the plan (not an Exception): the statistics stop at their next tensor
    instead of reading the rest, and their thread has ended when the interrupt arrives."""
    from nbinspect.analyze import stats as stats_module

    model = torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(50)])
    nbinspect.inspect(model)
    interrupted, ended = threading.Event(), []
    real = pipeline.stats_frames

    def late(*args, **kwargs):
        assert interrupted.wait(10)
        time.sleep(0.1)  # the interrupt has reached the block by now
        try:
            return real(*args, **kwargs)
        finally:
            ended.append(True)

    def plan():
        interrupted.set()
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "stats_frames", late)
    reduced = calls(stats_module, "batch_moments")
    before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt):
        inspect_while(model, plan, input=(2, 16))
    assert ended == [True] and _threads_left(before) == []
    assert reduced == []  # stopped before the first tensor: none of the 100 was reduced
