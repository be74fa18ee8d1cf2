"""The fakes parameters and buffers are swapped for, made directly from shape and strides,
against torch's own converter (``FakeTensorMode.from_tensor``, then the cast the plan asks for)."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensor

import nbinspect
from nbinspect import examples
from nbinspect.backends.torch import fake_kernels
from nbinspect.backends.torch.fake_kernels import ShimmedFakeMode, stand_in

from ..moe_models import hf_moe


def _plain_tensors() -> dict[str, torch.Tensor]:
    w = torch.randn(6, 4)
    return {
        "parameter": torch.nn.Parameter(torch.randn(5, 3)),
        "frozen parameter": torch.nn.Parameter(torch.randn(5, 3), requires_grad=False),
        "transposed parameter": torch.nn.Parameter(w.t().contiguous().t()),  # dense, not contiguous
        "channels-last weight": torch.nn.Parameter(torch.randn(8, 3, 3, 3).to(memory_format=torch.channels_last)),
        "bf16 parameter": torch.nn.Parameter(torch.randn(4, 4, dtype=torch.bfloat16)),
        "int64 buffer": torch.arange(7),
        "bool buffer": torch.ones(3, 2, dtype=torch.bool),
        "scalar buffer": torch.tensor(1.5),
        "empty buffer": torch.zeros(0, 4),
    }


def _not_plain() -> dict[str, torch.Tensor]:
    base = torch.randn(10, 4)
    return {
        "expanded buffer": torch.zeros(1, 4).expand(3, 4),
        "slice (a view)": base[2:5],
        "parameter on part of a storage": torch.nn.Parameter(base.view(-1)[4:].view(9, 4)),
        "sparse": torch.randn(3, 3).to_sparse(),
        "conjugate": torch.randn(2, 2, dtype=torch.complex64).conj(),
    }


def _reference(t: torch.Tensor, mode: ShimmedFakeMode, dtype: torch.dtype | None) -> torch.Tensor:
    fake = mode.from_tensor(t)
    if dtype is not None and fake.is_floating_point() and fake.dtype != dtype:
        fake = fake.detach().to(dtype).requires_grad_(t.requires_grad)
    return fake


def _described(t: torch.Tensor) -> tuple:
    return (
        type(t),
        t.shape,
        t.stride(),
        t.dtype,
        t.device,
        t.requires_grad,
        t.is_leaf,
        t.storage_offset(),
        t.untyped_storage().nbytes(),
    )


@pytest.mark.parametrize("dtype", [None, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(_plain_tensors()))
def test_a_plain_tensor_stands_in_as_torch_would_convert_it(name, dtype):
    t = _plain_tensors()[name]
    assert fake_kernels._plain(t)  # the direct path is the one under test
    with ShimmedFakeMode(allow_non_fake_inputs=True) as mode:
        fake = stand_in(t, mode, None, dtype)
        assert isinstance(fake, FakeTensor)
        assert _described(fake) == _described(_reference(t, mode, dtype))
        if dtype is None or not t.is_floating_point():  # the same fake when the model reaches t itself
            assert mode.from_tensor(t) is fake


@pytest.mark.parametrize("name", sorted(_not_plain()))
def test_other_tensors_are_converted_by_torch(name):
    t = _not_plain()[name]
    assert not fake_kernels._plain(t)
    with ShimmedFakeMode(allow_non_fake_inputs=True) as mode:
        assert stand_in(t, mode, None, None) is mode.from_tensor(t)


def test_meta_tensors_stand_in_on_the_cpu():
    with torch.device("meta"):
        t = torch.nn.Parameter(torch.empty(8, 4))
    with ShimmedFakeMode(allow_non_fake_inputs=True) as mode:
        fake = stand_in(t, mode, torch.device("cpu"), torch.bfloat16)
        assert (fake.device, fake.dtype, fake.shape, fake.requires_grad) == (
            torch.device("cpu"),
            torch.bfloat16,
            t.shape,
            True,
        )


class _ViewBuffer(torch.nn.Module):
    """A buffer that is a view of a parameter (converted by torch) beside the parameter (made directly)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8))
        self.register_buffer("wt", self.w.detach().t())
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.proj(x @ self.wt) @ self.w)


def _model(name: str) -> tuple[torch.nn.Module, torch.Tensor]:
    if name == "buffer viewing a parameter":
        return _ViewBuffer(), torch.randn(3, 8)
    if name == "mixtral on meta":  # fused experts, built on meta: the stand-ins are made on the CPU
        from transformers import MixtralConfig

        small = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}
        model = hf_moe(MixtralConfig, num_key_value_heads=2, vocab_size=97, num_local_experts=4, **small)
        return model, torch.zeros(1, 6, dtype=torch.long)
    return examples.build(name), examples.example_input(name)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "amp-fp16"])
@pytest.mark.parametrize(
    "name", ["tiny_lm", "cnn", "frozen", "shared", "mixtral on meta", "buffer viewing a parameter"]
)
def test_the_plan_is_the_same_as_with_torchs_conversion(name, precision, monkeypatch):
    model, x = _model(name)
    direct = nbinspect.memory(model, input=x, batch_size=4, precision=precision, optimizer="adamw")
    monkeypatch.setattr(fake_kernels, "_plain", lambda t: False)
    converted = nbinspect.memory(model, input=x, batch_size=4, precision=precision, optimizer="adamw")
    pd.testing.assert_frame_equal(pd.DataFrame(direct), pd.DataFrame(converted))


@pytest.mark.filterwarnings("ignore")
def test_a_quantized_model_is_planned_on_fake_tensors_every_time():
    """Packed weights cannot be compared, so FakeTensorMode's shared op cache is off for a
    model that holds them: with it on, the second plan failed there and fell back to a real
    run scaled from its batch."""
    torch.manual_seed(0)
    float_model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.LayerNorm(8))
    model = torch.ao.quantization.quantize_dynamic(float_model, {torch.nn.Linear}, dtype=torch.qint8)
    plans = [pd.DataFrame(nbinspect.memory(model, input=torch.randn(3, 5), batch_size=4)) for _ in range(3)]
    whole = plans[0][plans[0]["layer"].isna()].set_index("component")
    assert whole.loc["activations", "note"].endswith("measured on fake tensors")
    assert whole.loc["activations", "bytes"] > 0
    for plan in plans[1:]:
        pd.testing.assert_frame_equal(plan, plans[0])
