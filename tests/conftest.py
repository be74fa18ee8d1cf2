"""Shared fixtures: the example zoo, golden-file comparison, a model-unchanged check, call counting."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from nbinspect import examples

GOLDEN = Path(__file__).parent / "golden"


def pytest_configure(config):
    """Load the statistics kernels before any test runs, as a session has them soon after
    first use. Left to nbinspect's background warm-up (``analyze.fused.warm_up``), numba's
    import created loggers while pytest walked logging's registry at a test's setup:
    INTERNALERROR "dictionary changed size during iteration", the whole run lost."""
    from nbinspect.analyze import fused

    fused.warm_up()  # not where numba is unwelcome (vLLM installed) or NBINSPECT_WARM_UP=0
    if fused._warm_up is not None:
        fused._warm_up.join()


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite tests/golden/* from current output")


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path_factory, monkeypatch):
    """No test reads or writes the user's real ~/.config (nbinspect trust's approvals): each
    test starts with an empty config home of its own."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config-home")))


@pytest.fixture
def golden(request):
    """golden(name, text): compare with tests/golden/<name>, or rewrite it with --update-golden."""

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if request.config.getoption("--update-golden"):
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"missing {path}: run pytest --update-golden"
        assert text == path.read_text(encoding="utf-8")

    return check


@pytest.fixture
def calls(monkeypatch):
    """calls(module, name, key=id): the real ``module.name`` stays in place, wrapped to record
    ``key(first argument)`` per call; returns the list it records into (how often work is done)."""

    def record(module: Any, name: str, key: Callable[[Any], Any] = id) -> list:
        real, seen = getattr(module, name), []

        @functools.wraps(real)
        def recorded(first, *args, **kwargs):
            seen.append(key(first))
            return real(first, *args, **kwargs)

        monkeypatch.setattr(module, name, recorded)
        return seen

    return record


@pytest.fixture
def split_threads(monkeypatch) -> None:
    """The fused kernels split a tensor into one share per ``fused.PART`` elements whatever
    the CPU count, so a test covers the split and the merge of the threads' parts."""
    from nbinspect.analyze import fused

    monkeypatch.setattr(fused, "_threads", lambda n: max(1, n // fused.PART))


@pytest.fixture(params=examples.names())
def zoo_name(request) -> str:
    return request.param


def model_state(model: torch.nn.Module) -> dict:
    """Everything an analyzer must leave alone: modes, flags, values, hooks, devices."""
    return {
        "modes": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "grads": [p.grad is None for p in model.parameters()],
        "values": {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()},
        "devices": [str(t.device) for t in model.state_dict().values()],
        "hooks": [(len(m._forward_hooks), len(m._forward_pre_hooks), len(m._backward_hooks)) for m in model.modules()],
        # plain tensor attributes (what legacy prune/weight_norm/spectral_norm hooks recompute): same objects
        "attrs": [
            (i, k, id(v)) for i, m in enumerate(model.modules()) for k, v in vars(m).items() if torch.is_tensor(v)
        ],
        "rng": torch.get_rng_state(),
    }


def assert_unchanged(before: dict, after: dict) -> None:
    for key in ("modes", "requires_grad", "grads", "devices", "hooks", "attrs"):
        assert before[key] == after[key], key
    assert before["values"].keys() == after["values"].keys()
    for name, value in before["values"].items():
        other = after["values"][name]
        assert value.dtype == other.dtype and value.shape == other.shape, name
        if value.device.type != "meta":
            assert torch.equal(value, other), name
    assert torch.equal(before["rng"], after["rng"]), "global RNG state changed"
