"""The example zoo: deterministic, seeded without touching global RNG, and runnable."""

from __future__ import annotations

import pytest
import torch

from nbinspect import examples


def test_build_is_deterministic_and_leaves_global_rng(zoo_name):
    rng = torch.get_rng_state()
    a, b = examples.build(zoo_name), examples.build(zoo_name)
    assert torch.equal(rng, torch.get_rng_state())
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    c = examples.build(zoo_name, seed=1)
    assert any(
        not torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), c.state_dict().values())
        if x.is_floating_point() and x.numel() > 1
    )


def test_forward_runs_on_example_input(zoo_name):
    model = examples.build(zoo_name).eval()
    with torch.no_grad():
        out = model(examples.example_input(zoo_name))
    assert torch.isfinite(out[out != float("-inf")]).all()


def test_unknown_example_names_the_choices():
    with pytest.raises(ValueError, match="unknown example 'resnet'.*tiny_lm"):
        examples.build("resnet")
