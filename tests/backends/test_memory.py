"""The training-memory plan against the real thing: a real optimizer step on CPU (its state
tensors, gradients, parameters) and the tensors a real forward pass saves for backward."""

from __future__ import annotations

import contextlib

import pandas as pd
import pytest
import torch

import nbinspect
from nbinspect import examples, schema
from nbinspect.backends.torch.memory import OPTIMIZERS

from ..conftest import assert_unchanged, model_state
from ..trace_support import graph_saved_bytes

REAL = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "sgd-momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p),
    "adamw": lambda p: torch.optim.AdamW(p),
    "adam-amsgrad": lambda p: torch.optim.Adam(p, amsgrad=True),
    "adamax": lambda p: torch.optim.Adamax(p),
    "nadam": lambda p: torch.optim.NAdam(p),
    "radam": lambda p: torch.optim.RAdam(p),
    "adadelta": lambda p: torch.optim.Adadelta(p),
    "rmsprop": lambda p: torch.optim.RMSprop(p),
    "adagrad": lambda p: torch.optim.Adagrad(p),
    "adafactor": lambda p: torch.optim.Adafactor(p),
}


def _bytes(tensors) -> int:
    """Bytes of distinct storages."""
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values())


def _whole(plan, component: str):
    return plan[plan["layer"].isna() & (plan["component"] == component)]["bytes"].iloc[0]


def _batch(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.repeat(n // x.shape[0], *([1] * (x.dim() - 1)))


def _real_step(model, x, optimizer: str, autocast: torch.dtype | None = None) -> dict:
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = REAL[optimizer](trainable)
    model.train()
    with torch.autocast("cpu", dtype=autocast) if autocast else contextlib.nullcontext():
        out = model(x)
    saved = graph_saved_bytes(out, model, [x])
    logits = out if isinstance(out, torch.Tensor) else out.logits
    logits.float().sum().backward()
    opt.step()
    state = [t for s in opt.state.values() for t in s.values() if isinstance(t, torch.Tensor)]
    return {
        "parameters": _bytes(model.parameters()),
        "gradients": _bytes(p.grad for p in trainable),
        "optimizer_state": _bytes(state),
        "activations": saved,
    }


def test_every_planned_optimizer_has_a_real_check():
    assert set(OPTIMIZERS) == set(REAL)


@pytest.mark.parametrize("optimizer", sorted(REAL))
@pytest.mark.parametrize("name", ["cnn", "frozen", "tiny_lm"])
def test_plan_matches_a_real_optimizer_step(name, optimizer):
    """Exact for parameters, gradients and optimizer state; activations at batch 8 measured
    on fake tensors agree exactly with the tensors a real batch-8 forward saves."""
    x = examples.example_input(name)
    plan = nbinspect.memory(examples.build(name), input=x, batch_size=8, optimizer=optimizer)
    real = _real_step(examples.build(name), _batch(x, 8), optimizer)
    for component, value in real.items():
        assert _whole(plan, component) == value, component
    assert _whole(plan, "inputs") == _batch(x, 8).nbytes


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_plan_matches_a_half_model(precision):
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    x = examples.example_input("tiny_lm")
    plan = nbinspect.memory(examples.build("tiny_lm"), input=x, batch_size=4, precision=precision)
    real = _real_step(examples.build("tiny_lm").to(dtype), _batch(x, 4), "adam")
    for component, value in real.items():
        assert _whole(plan, component) == value, component


def test_amp_plan_matches_an_autocast_step():
    """fp32 parameters, gradients and state; autocast's bf16 weight copies are saved tensors."""
    x = examples.example_input("tiny_lm")
    plan = nbinspect.memory(examples.build("tiny_lm"), input=x, batch_size=4, precision="amp-bf16")
    real = _real_step(examples.build("tiny_lm"), _batch(x, 4), "adam", autocast=torch.bfloat16)
    for component, value in real.items():
        assert _whole(plan, component) == value, component
    fp32 = nbinspect.memory(examples.build("tiny_lm"), input=x, batch_size=4)
    assert _whole(plan, "parameters") == _whole(fp32, "parameters")


def test_master_weights_match_a_manual_mixed_precision_step():
    model = examples.build("mlp").to(torch.bfloat16)
    x = _batch(examples.example_input("mlp"), 8).to(torch.bfloat16)
    plan = nbinspect.memory(examples.build("mlp"), input=x, precision="bf16", master_weights=True)
    masters = [p.detach().float().requires_grad_() for p in model.parameters()]
    opt = torch.optim.Adam(masters)
    model(x).float().sum().backward()
    for master, p in zip(masters, model.parameters()):
        master.grad = p.grad.float()
    opt.step()
    state = [t for s in opt.state.values() for t in s.values()]
    assert _whole(plan, "optimizer_state") == _bytes(state) + _bytes(masters)
    assert _whole(plan, "parameters") == _whole(plan, "gradients") == _bytes(model.parameters())


def test_per_module_rows_sum_to_the_whole(zoo_name):
    plan = nbinspect.memory(examples.build(zoo_name), input=examples.example_input(zoo_name), batch_size=4)
    schema.MEMORY.validate(plan)
    per_module = plan[plan["layer"].notna()]
    for component in ("parameters", "buffers", "gradients", "optimizer_state", "activations"):
        assert per_module[per_module["component"] == component]["bytes"].sum() == _whole(plan, component)
    whole = plan[plan["layer"].isna()].set_index("component")["bytes"]
    assert whole["total"] == whole.drop("total").sum()
    assert plan[plan["layer"].isna()]["note"].notna().all()


def test_plan_leaves_the_model_alone(zoo_name):
    model = examples.build(zoo_name).eval()
    before = model_state(model)
    nbinspect.memory(model, input=examples.example_input(zoo_name), batch_size=16, precision="amp-bf16")
    assert_unchanged(before, model_state(model))
    assert all(type(p) is torch.nn.Parameter for p in model.parameters())


def test_gradient_checkpointing_keeps_block_inputs_and_one_block():
    x = examples.example_input("tiny_lm")
    full = nbinspect.memory(examples.build("tiny_lm"), input=x)
    ckpt = nbinspect.memory(examples.build("tiny_lm"), input=x, grad_checkpointing=True)
    flow = nbinspect.trace(examples.build("tiny_lm").train(), x).frames["flow"]
    blocks = flow[flow["name"].isin(["blocks.0", "blocks.1"])]
    expected = (
        _whole(full, "activations")
        - blocks["activation_bytes"].sum()
        + blocks["input_bytes"].sum()
        + blocks["activation_bytes"].max()
    )
    assert _whole(ckpt, "activations") == expected < _whole(full, "activations")
    with pytest.raises(ValueError, match="ModuleList"):
        nbinspect.memory(examples.build("mlp"), input=(4, 32), grad_checkpointing=True)


def test_meta_model_plans_without_memory():
    with torch.device("meta"):
        model = examples.build("cnn")
    plan = nbinspect.memory(model, input=(2, 3, 32, 32), batch_size=64)
    real = nbinspect.memory(examples.build("cnn"), input=(2, 3, 32, 32), batch_size=64)
    assert plan["bytes"].equals(real["bytes"])


def test_without_input_only_tensors_are_planned():
    plan = nbinspect.memory(examples.build("mlp"), optimizer="sgd")
    assert pd.isna(_whole(plan, "activations")) and pd.isna(_whole(plan, "inputs"))
    assert _whole(plan, "optimizer_state") == 0
    assert _whole(plan, "total") == 2 * _whole(plan, "parameters")
    assert "not measured" in str(plan)


def test_printed_in_human_units():
    text = str(nbinspect.memory(examples.build("tiny_lm"), input=examples.example_input("tiny_lm"), batch_size=32))
    assert text.startswith("Training memory plan")
    assert "KiB" in text and "MiB" in text and "optimizer_state" in text and "Modules holding the most" in text


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"optimizer": "lamb"}, "unknown optimizer 'lamb'"),
        ({"precision": "int8"}, "unknown precision 'int8'"),
        ({"master_weights": True}, "master_weights=True keeps fp32 copies"),
    ],
)
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        nbinspect.memory(examples.build("mlp"), **options)


def test_llama_plan_on_meta_matches_a_real_autocast_step():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=100,
        use_cache=False,
    )
    with torch.device("meta"):
        meta = transformers.LlamaForCausalLM(config)
    plan = nbinspect.memory(meta, input=(1, 12), batch_size=4, precision="amp-bf16", input_dtype=torch.long)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config)
    x = torch.zeros(4, 12, dtype=torch.long)
    real = _real_step(model, x, "adam", autocast=torch.bfloat16)
    for component in ("parameters", "gradients", "optimizer_state"):
        assert _whole(plan, component) == real[component], component
    # Stated tolerance 5%: on fake tensors transformers cannot read the mask's values, so
    # it builds the [b, 1, t, t] causal mask that a real all-ones batch skips, and the
    # attention kernel then also saves the mask (measured: +7,296 bytes per layer, 2.7%).
    planned, measured = _whole(plan, "activations"), real["activations"]
    assert measured <= planned <= 1.05 * measured


class _DataDependent(torch.nn.Module):
    """Branches on a tensor's value: fake tensors cannot run it, a real batch can."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)

    def forward(self, x):
        h = torch.relu(self.lin(x))
        return h * 2 if h.sum() > 0 else h


def test_data_dependent_model_is_measured_for_real_and_scaled():
    x = torch.randn(2, 16)
    model = _DataDependent()
    plan = nbinspect.memory(model, input=x, batch_size=8)
    row = plan[plan["layer"].isna() & (plan["component"] == "activations")].iloc[0]
    assert row["bytes"] == 4 * (2 * 16 * 4)  # ReLU's output at batch 2, float32, scaled by 8 / 2
    assert "measured at batch 2, scaled to 8" in row["note"]


def test_data_dependent_model_cannot_be_planned_in_another_precision():
    with pytest.raises(
        nbinspect.TraceError, match=r"failed in _DataDependent \(the root module\) with inputs \[2, 16\].*fake tensors"
    ):
        nbinspect.memory(_DataDependent(), input=(2, 16), precision="bf16")
