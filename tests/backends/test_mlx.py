"""MLX models: the same frames as torch models, with counts checked independently."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import nbinspect
from nbinspect.backends.mlx.source import to_torch
from nbinspect.schema import FLOW, LAYERS, PARAMS, STATS
from tests.mlx_models import (  # skips without mlx; fails in CI (CI=true), where the set-up installs it
    CNN,
    MLP,
    TinyLM,
    TorchCNN,
    TorchMLP,
    TorchTinyLM,
    mx,
    nn,
    tree_flatten,
)


@pytest.fixture
def lm():
    mx.random.seed(0)
    return TinyLM()


def unique_arrays(model) -> dict[int, mx.array]:
    return {id(a): a for _, a in tree_flatten(model.parameters())}


# ------------------------------------------------------------------ structure


def test_params_count_tied_arrays_once_and_follow_tree_flatten_names(lm):
    insp = nbinspect.inspect(lm, stats=False)
    PARAMS.validate(insp.params)
    LAYERS.validate(insp.layers)
    assert insp.framework == "mlx"
    flat = tree_flatten(lm.parameters())
    assert list(insp.params["name"]) == [k for k, _ in flat]
    unique = unique_arrays(lm)
    assert insp.totals["total_params"] == sum(a.size for a in unique.values())
    assert insp.totals["total_params_by_path"] == sum(a.size for _, a in flat)
    assert insp.totals["param_bytes"] == sum(a.nbytes for a in unique.values())
    tied = insp.params.set_index("name")["tied_to"]
    assert tied["head.weight"] == "embed.weight"
    assert insp.totals["total_params"] == insp.totals["total_params_by_path"] - 50 * 32


def test_frozen_arrays_are_non_trainable(lm):
    lm.blocks[0].freeze()
    insp = nbinspect.inspect(lm, stats=False)
    trainable = {id(a) for _, a in tree_flatten(lm.trainable_parameters())}
    expected = sum(a.size for i, a in unique_arrays(lm).items() if i in trainable)
    assert insp.totals["trainable_params"] == expected
    row = insp.layers.set_index("name").loc["blocks.0"]
    assert row["trainable_params"] == 0 and row["frozen_params"] == row["params"] > 0
    assert not insp.params.set_index("name").loc["blocks.0.mlp.layers.0.weight", "requires_grad"]


def test_tree_containers_types_and_training_flags():
    model = CNN()
    model.eval()
    layers = nbinspect.layers(model).set_index("name")
    assert layers.loc["", "type"] == "CNN"
    assert layers.loc["conv1", "type"] == "Conv2d" and layers.loc["conv1", "is_leaf"]
    assert not layers["training"].any()
    lm_layers = nbinspect.layers(TinyLM()).set_index("name")
    assert lm_layers.loc["blocks", "type"] == "list"
    assert lm_layers.loc["blocks.0.mlp.layers", "parent"] == "blocks.0.mlp"
    assert lm_layers.loc["blocks.0.attn.query_proj", "type"] == "Linear"


def test_layer_attrs_of_common_mlx_layers():
    class Custom(nn.Module):
        def __init__(self):
            super().__init__()
            self.width = 7
            self.scale = 0.5  # public, not in the repr

        def _extra_repr(self):
            return "width=7, mode='fast'"

    model = nn.Sequential(
        nn.Linear(4, 6, bias=False),
        nn.Conv2d(3, 8, (3, 5), stride=2, padding=1, groups=1),
        nn.Conv1d(4, 6, 3, groups=2),
        nn.LayerNorm(6, eps=1e-6),
        nn.RMSNorm(6),
        nn.BatchNorm(8, momentum=0.2),
        nn.Embedding(100, 16),
        nn.Dropout(0.1),
        nn.MultiHeadAttention(16, 4),
        nn.RoPE(8, traditional=True),
        nn.MaxPool2d(2, stride=2),
        nn.GELU(),
        Custom(),
    )
    frame = nbinspect.layers(model)
    attrs = dict(zip(frame["name"], frame["attrs"]))
    assert attrs[""] == {"length": 13}
    assert attrs["layers.0"] == {"input_dims": 4, "output_dims": 6, "bias": False}
    conv = attrs["layers.1"]
    assert (conv["in_channels"], conv["out_channels"], conv["kernel_size"]) == (3, 8, (3, 5))
    assert (conv["stride"], conv["padding"], conv["groups"], conv["bias"]) == ((2, 2), (1, 1), 1, True)
    assert attrs["layers.2"]["in_channels"] == 4 and attrs["layers.2"]["groups"] == 2
    assert attrs["layers.3"]["eps"] == 1e-6 and attrs["layers.3"]["affine"] is True
    assert attrs["layers.4"]["eps"] == 1e-5
    assert attrs["layers.5"]["momentum"] == 0.2 and attrs["layers.5"]["num_features"] == 8
    assert attrs["layers.6"] == {"num_embeddings": 100, "dims": 16}
    assert attrs["layers.7"] == {"p": 0.1}
    assert attrs["layers.8"] == {"num_heads": 4, "dims": 16, "head_dim": 4}
    assert attrs["layers.9"]["dims"] == 8 and attrs["layers.9"]["traditional"] is True
    assert attrs["layers.10"]["kernel_size"] == (2, 2)
    assert attrs["layers.12"] == {"width": 7, "scale": 0.5, "mode": "fast"}


# ------------------------------------------------------------------ statistics


def test_stats_match_a_float64_reference_float32_and_bfloat16():
    mx.random.seed(1)
    small = mx.random.normal((64, 48)) * 0.02 + 0.5
    large = (mx.random.normal((300_000,)) * 3.0).astype(mx.bfloat16)  # chunked path, bf16 upcast per chunk

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.small, self.large = small, large

    frame = nbinspect.stats(Holder()).set_index("name")
    STATS.validate(frame.reset_index())
    for name, array in (("small", small), ("large", large)):
        ref = np.asarray(array.astype(mx.float32)).astype(np.float64)
        row = frame.loc[name]
        assert row["numel"] == ref.size
        assert row["mean"] == pytest.approx(ref.mean(), rel=1e-6, abs=1e-9)
        assert row["std"] == pytest.approx(ref.std(), rel=1e-6)
        assert row["l2"] == pytest.approx(np.linalg.norm(ref), rel=1e-6)
        assert (row["min"], row["max"]) == (ref.min(), ref.max())
        assert row["dtype"] == ("bfloat16" if name == "large" else "float32")


def test_values_are_zero_copy_views_of_the_arrays():
    a = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    b = mx.ones((5,), dtype=mx.bfloat16)
    assert to_torch(a).data_ptr() == np.asarray(a).ctypes.data
    assert to_torch(b).dtype == torch.bfloat16
    first, second = to_torch(b), to_torch(b)  # both alive: a fresh copy each time could not share an address
    assert first.data_ptr() == second.data_ptr() == np.asarray(b.view(mx.uint16)).ctypes.data  # the array's memory
    assert torch.equal(to_torch(a), torch.arange(12, dtype=torch.float32).reshape(3, 4))


# ------------------------------------------------------------------ trace and FLOPs


def torch_flops(model: torch.nn.Module, x: torch.Tensor) -> int:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH), torch.no_grad():
        model(x)
    return counter.get_total_flops()


@pytest.mark.parametrize(
    ("build", "twin", "mlx_input", "torch_input"),
    [
        (MLP, TorchMLP, lambda: mx.zeros((5, 8)), lambda: torch.zeros(5, 8)),
        (TinyLM, TorchTinyLM, lambda: mx.zeros((2, 12), dtype=mx.int32), lambda: torch.zeros(2, 12, dtype=torch.long)),
        (CNN, TorchCNN, lambda: mx.zeros((2, 32, 32, 3)), lambda: torch.zeros(2, 3, 32, 32)),
    ],
    ids=["mlp", "transformer", "cnn"],
)
def test_flops_equal_torch_flop_counter_on_the_same_model(build, twin, mlx_input, torch_input):
    insp = nbinspect.trace(build(), mlx_input())
    assert insp.totals["flops"] == torch_flops(twin(), torch_input()) > 0


@pytest.mark.parametrize(
    ("layer", "twin", "shape"),
    [
        (lambda: nn.Conv3d(2, 4, 3, stride=2, padding=1), lambda: torch.nn.Conv3d(2, 4, 3, 2, 1), (1, 6, 6, 6, 2)),
        (lambda: nn.ConvTranspose1d(3, 5, 4, stride=2), lambda: torch.nn.ConvTranspose1d(3, 5, 4, 2), (2, 7, 3)),
        (lambda: nn.Conv1d(4, 8, 3, groups=2), lambda: torch.nn.Conv1d(4, 8, 3, groups=2), (2, 9, 4)),
    ],
    ids=["conv3d", "conv_transpose1d", "grouped_conv1d"],
)
def test_conv_flops_equal_torch_channels_last_against_channels_first(layer, twin, shape):
    channels_first = (shape[0], shape[-1], *shape[1:-1])
    assert nbinspect.trace(layer(), shape).totals["flops"] == torch_flops(twin(), torch.zeros(channels_first))


def test_trace_shapes_calls_flow_and_attention_flops(lm):
    insp = nbinspect.trace(lm, mx.zeros((2, 12), dtype=mx.int32))
    FLOW.validate(insp.flow)
    layers = insp.layers.set_index("name")
    assert layers.loc["embed", "output_shapes"] == [(2, 12, 32)]
    assert layers.loc["head", "output_dtypes"] == ["float32"]
    assert layers.loc["blocks.0.attn", "input_shapes"] == [(2, 12, 32)] * 3
    # attention inside nn.MultiHeadAttention: 2·b·h·s·s·(d_q + d_v), plus its four projections
    proj = 2 * 2 * 12 * 32 * 32
    assert layers.loc["blocks.0.attn", "flops"] == 4 * proj + 2 * 2 * 4 * 12 * 12 * (8 + 8)
    assert "LayerNorm x4" in insp.totals["flops_note"] and "GELU x2" in insp.totals["flops_note"]
    assert insp.flow["own_flops"].sum() == insp.totals["flops"]
    assert insp.io["input"] == [{"path": "0", "shape": [2, 12], "dtype": "int32"}]
    assert insp.io["output"] == [{"path": "output", "shape": [2, 12, 50], "dtype": "float32"}]
    # activations: output arrays of each call, each array once
    assert insp.totals["activation_bytes"] == insp.flow["own_activation_bytes"].sum() > 0


def test_a_module_called_twice_is_two_calls():
    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def __call__(self, x):
            return self.lin(self.lin(x))

    insp = nbinspect.trace(Twice(), (3, 4))
    flow = insp.flow
    assert list(flow["name"]) == ["", "lin", "lin"] and list(flow["call"]) == [0, 0, 1]
    assert insp.layers.set_index("name").loc["lin", "calls"] == 2
    assert insp.totals["flops"] == 2 * (2 * 3 * 4 * 4)


def model_state(model):
    modules = [m for _, m in model.named_modules()]
    return (
        [(type(m), sorted(vars(m)), m.training, sorted(m._no_grad)) for m in modules],
        [(k, id(a), np.array(a.astype(mx.float32)).tobytes()) for k, a in tree_flatten(model.parameters())],
        [k for k, _ in tree_flatten(model.trainable_parameters())],
    )


class Pair(nn.Module):
    """Positional, keyword and nested inputs; nested outputs with non-array leaves."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(6, 3)

    def __call__(self, x, y, extra):
        out = self.a(x) + self.b(y) + self.a(extra["z"][0])
        return {"out": out, "pair": (out, None), "label": "ok"}


def test_nested_inputs_and_outputs_of_an_mlx_model():
    insp = nbinspect.trace(Pair(), (2, 4), mx.zeros((2, 6), dtype=mx.float16), extra={"z": [(2, 4)]})
    assert insp.layers.set_index("name").loc["a", "calls"] == 2
    assert insp.layers.set_index("name").loc["", "input_shapes"] == [(2, 4), (2, 6), (2, 4)]
    assert insp.io["input"] == [
        {"path": "0", "shape": [2, 4], "dtype": "float32"},  # shapes become zeros of the model's dtype
        {"path": "1", "shape": [2, 6], "dtype": "float16"},
        {"path": "extra.z.0", "shape": [2, 4], "dtype": "float32"},
    ]
    assert insp.io["output"] == [
        {"path": "out", "shape": [2, 3], "dtype": "float32"},
        {"path": "pair.0", "shape": [2, 3], "dtype": "float32"},
        {"path": "pair.1", "type": "NoneType"},
        {"path": "label", "type": "str"},
    ]


def test_batch_size_resizes_given_arrays_and_shapes_alike():
    from nbinspect.backends.mlx.trace import run_mlx_trace

    given = mx.ones((2, 6))
    result = run_mlx_trace(Pair(), ((2, 4), given), {"extra": {"z": [(2, 4)]}}, batch_size=5)
    assert [r["shape"] for r in result.inputs] == [[5, 4], [5, 6], [5, 4]]
    assert result.totals["input_bytes"] == 5 * (4 + 6 + 4) * 4
    assert given.shape == (2, 6)  # the caller's array is not changed


def test_watch_totals_add_up_every_call_the_block_made():
    """Totals over both calls (the totals code the torch watch shares), each against a
    separate trace: output arrays of the two calls are distinct, so activations add up too."""
    from nbinspect.backends import backend_for

    net, x2, x3 = MLP(), mx.zeros((2, 8)), mx.zeros((3, 8))
    with backend_for(net).watch(net) as watched:
        net(x2)
        net(x3)
    one, two = nbinspect.trace(net, x2).totals, nbinspect.trace(net, x3).totals
    assert watched.totals["model_calls"] == 2
    assert watched.totals["flops"] == one["flops"] + two["flops"] == 2 * 5 * (8 * 32 + 32 * 16 + 16 * 4)
    assert watched.totals["input_bytes"] == (2 + 3) * 8 * 4
    assert watched.totals["activation_bytes"] == one["activation_bytes"] + two["activation_bytes"] > 0
    with backend_for(net).watch(net, flops=False) as unwatched:
        net(x2)
    assert unwatched.totals["flops"] is None and unwatched.totals["model_calls"] == 1


def test_failing_forward_names_the_layer_and_leaves_the_model_unchanged(lm):
    lm.blocks[1].freeze()
    lm.eval()
    lm.blocks[0].train()
    before = model_state(lm)
    matmul, sdpa = mx.array.__matmul__, mx.fast.scaled_dot_product_attention
    original_call = type(lm.blocks[1].mlp.layers[0]).__call__
    lm.blocks[1].mlp.layers[0].weight = mx.zeros((128, 31))  # wrong shape: fails half-way
    broken = model_state(lm)
    with pytest.raises(nbinspect.TraceError, match=r"blocks\.1\.mlp\.layers\.0 \(Linear\) with inputs \[2, 12, 32\]"):
        nbinspect.trace(lm, mx.zeros((2, 12), dtype=mx.int32), input_dtype=None)
    assert model_state(lm) == broken
    assert mx.array.__matmul__ == matmul and mx.fast.scaled_dot_product_attention is sdpa
    assert type(lm.blocks[1].mlp.layers[0]).__call__ is original_call
    assert before[0] == broken[0]  # the wrong weight was ours; flags and classes are as before


def test_batchnorm_running_stats_replaced_in_training_mode_are_put_back():
    model = CNN()  # MLX modules start in training mode: BatchNorm replaces its running statistics
    before = model_state(model)
    nbinspect.trace(model, mx.ones((2, 32, 32, 3)))
    assert model_state(model) == before


def test_dropout_in_training_mode_leaves_the_random_key_as_it_was():
    model = MLP()  # training mode: Dropout draws from MLX's global key
    mx.random.seed(7)
    expected = mx.random.uniform(shape=(4,))
    mx.random.seed(7)
    nbinspect.trace(model, (3, 8))
    assert mx.array_equal(mx.random.uniform(shape=(4,)), expected).item()


def test_trace_error_carries_the_partial_inspection(lm):
    lm.norm.weight = mx.zeros((3,))
    with pytest.raises(nbinspect.TraceError) as caught:
        nbinspect.trace(lm, mx.zeros((1, 4), dtype=mx.int32))
    flow = caught.value.partial.flow
    assert flow.iloc[-1]["status"] == "failed" and flow.iloc[-1]["name"] == "norm"
    assert flow.iloc[0]["status"] == "interrupted"


def test_training_flag_for_a_trace_is_put_back():
    model = MLP()
    model.eval()
    nbinspect.memory(model, input=(4, 8), optimizer="adam")  # the plan traces in training mode
    assert not any(m.training for _, m in model.named_modules())


# ------------------------------------------------------------------ memory


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("adam", lambda o: o.Adam(1e-3)),
        ("adamw", lambda o: o.AdamW(1e-3)),
        ("sgd", lambda o: o.SGD(1e-2)),
        ("sgd-momentum", lambda o: o.SGD(1e-2, momentum=0.9)),
        ("lion", lambda o: o.Lion(1e-3)),
        ("adadelta", lambda o: o.AdaDelta(1e-3)),
        ("adafactor", lambda o: o.Adafactor()),
    ],
)
def test_optimizer_state_is_what_mlx_optimizers_allocate(lm, name, make):
    import mlx.optimizers as optim

    lm.blocks[0].freeze()
    optimizer = make(optim)
    optimizer.init(lm.trainable_parameters())
    plan = nbinspect.memory(lm, optimizer=name).set_index("component")
    assert plan.loc["optimizer_state", "bytes"].iloc[0] == sum(a.nbytes for _, a in tree_flatten(optimizer.state))
    assert plan.loc["parameters", "bytes"].iloc[0] == sum(a.nbytes for a in unique_arrays(lm).values())
    _, grads = nn.value_and_grad(lm, lambda m, x: m(x).sum())(lm, mx.zeros((1, 4), dtype=mx.int32))
    assert plan.loc["gradients", "bytes"].iloc[0] == sum(a.nbytes for _, a in tree_flatten(grads))  # per path


def test_memory_plan_with_input_measures_activations_and_quotes_mlx(lm):
    plan = nbinspect.memory(lm, input=(2, 12), input_dtype="int32", batch_size=4, optimizer="adamw")
    whole = plan[plan["layer"].isna()].set_index("component")
    traced = nbinspect.trace(lm, mx.zeros((4, 12), dtype=mx.int32))
    assert whole.loc["activations", "bytes"] == traced.totals["activation_bytes"]
    assert whole.loc["inputs", "bytes"] == 4 * 12 * 4
    assert "MLX measured" in whole.loc["activations", "note"]
    with pytest.raises(ValueError, match="no autocast"):
        nbinspect.memory(lm, input=(2, 12), precision="bf16")


# ------------------------------------------------------------------ summary


def test_summary_is_a_torchinfo_style_table_from_the_frames():
    model = CNN()
    insp = nbinspect.mlx.summary(model, (32, 32, 3), batch_size=2)
    text = str(insp)
    assert isinstance(insp, str) and text == insp.inspection.table()
    total = sum(a.size for a in unique_arrays(model).values())
    frozen = 32  # BatchNorm's running mean and variance
    assert f"Total params: {total:,}" in text
    assert f"Trainable params: {total - frozen:,}" in text and f"Non-trainable params: {frozen:,}" in text
    assert "├─conv1 (Conv2d)" in text and "[2, 32, 32, 8]" in text
    assert f"Total FLOPs: {insp.totals['flops']:,}" in text
    assert "Input shape: (2, 32, 32, 3)" in text
    assert "Forward/backward pass size (MiB)" in text and "Estimated Total Size (MiB)" in text
    assert f"Params size (MiB): {insp.totals['param_bytes'] / 2**20:.2f}" in text  # MiB, as everywhere
    assert "MLX memory after the forward pass: active" in text and "cache" in text
    assert {"mlx_active_bytes", "mlx_peak_bytes", "mlx_cache_bytes"} <= set(insp.totals)
    assert insp.layers.equals(nbinspect.trace(model, mx.zeros((2, 32, 32, 3))).layers)


def test_summary_inspects_the_model_once(calls):
    from nbinspect.analyze import stats as stats_module
    from nbinspect.analyze import structure
    from nbinspect.backends import backend_named

    model = CNN()
    built = calls(backend_named("mlx"), "source")  # the model read into a source
    layers = calls(structure, "layers")  # the structure frames
    read = calls(stats_module, "tensor_stats")  # the weights
    insp = nbinspect.mlx.summary(model, (32, 32, 3), batch_size=2, stats=True)
    assert (len(built), len(layers), len(read)) == (1, 1, 1)  # was (2, 2, 2): inspected without, then with input
    assert type(insp) is nbinspect.mlx.ModelSummary and {"stats", "flow"} <= set(insp.frames)
    assert type(insp.inspection) is nbinspect.mlx.SummaryInspection
    assert insp.layers.equals(nbinspect.trace(model, mx.zeros((2, 32, 32, 3))).layers)
    assert insp.stats.equals(nbinspect.stats(model))


def test_summary_names_the_layer_a_channels_first_shape_does_not_fit():
    with pytest.raises(ValueError, match=r"does not fit the model \(MLX layers take channels last.*conv1 \(Conv2d\)"):
        nbinspect.mlx.summary(CNN(), (3, 32, 32), on_error="raise")
    with pytest.warns(RuntimeWarning, match=r"channels last.*conv1 \(Conv2d\)"):
        text = nbinspect.mlx.summary(CNN(), (3, 32, 32))  # the design's default: warn and go on
    assert "Total params:" in text and "The forward pass failed" in text


def test_summary_trainable_column_counts_and_verbose_levels():
    """Issue 26: Trainable said True/False/Partial; the design counts."""
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    model.layers[0].freeze()
    text = nbinspect.mlx.summary(model, (4,))
    row = next(line for line in text.splitlines() if "├─" in line and "Linear" in line)
    assert row.split()[-2:] == ["40", "--"] or row.split()[-2:] == ["40", "0"]
    last = [line for line in text.splitlines() if "├─" in line and "Linear" in line][-1]
    assert last.split()[-2:] == ["18", "18"]
    quiet = nbinspect.mlx.summary(model, (4,), verbose=0)
    assert "├─" not in quiet and "Total params: 58" in quiet
    detailed = nbinspect.mlx.summary(model, (4,), verbose=2)
    assert "weight" in detailed and "bias" in detailed
    assert "weight" in nbinspect.mlx.summary(nn.Linear(10, 5))  # no submodules: parameter rows at 1
    anybatch = nbinspect.mlx.summary(model, (4,), batch_size=-1)
    assert "Batch size: any (-1): measured at 1" in anybatch
    assert "Trainable" in nbinspect.mlx.summary(model, (4,), device="cpu")
    with pytest.raises(ValueError, match="device"):
        nbinspect.mlx.summary(model, (4,), device="tpu")


# ------------------------------------------------------------------ compare, export, widget, magic


def test_compare_mlx_with_mlx_and_with_files_saved_by_mlx(tmp_path):
    import mlx.optimizers as optim

    mx.random.seed(2)
    model = MLP()
    model.layers[2].set_dtype(mx.bfloat16)
    before = dict(tree_flatten(model.parameters()))
    before_np = {k: np.asarray(v.astype(mx.float32)).astype(np.float64) for k, v in before.items()}
    mx.savez(str(tmp_path / "before.npz"), **before)
    mx.save_safetensors(str(tmp_path / "before.safetensors"), before)
    same = nbinspect.compare(model, model).frame
    assert set(same["status"]) == {"same"}

    optimizer = optim.SGD(0.1)
    step = nn.value_and_grad(model, lambda m, x, y: ((m(x).astype(mx.float32) - y) ** 2).mean())
    x, y = mx.random.normal((16, 8)), mx.random.normal((16, 4))
    for _ in range(2):
        _, grads = step(model, x, y)
        optimizer.update(model, grads)
        mx.eval(model.parameters())
    after = {k: np.asarray(v.astype(mx.float32)).astype(np.float64) for k, v in tree_flatten(model.parameters())}
    for path in ("before.npz", "before.safetensors"):
        frame = nbinspect.compare(tmp_path / path, model).frame.set_index("name")
        assert set(frame["status"]) == {"changed"}
        for name, a in before_np.items():
            expected = np.linalg.norm(after[name] - a) / np.linalg.norm(a)
            assert frame.loc[name, "rel_change"] == pytest.approx(expected, rel=1e-6)
        assert frame.loc["layers.2.weight", "dtype_a"] == "bfloat16"


def test_json_export_and_widget_take_an_mlx_model(lm, tmp_path):
    import json

    import jsonschema

    insp = nbinspect.inspect(lm, input=mx.zeros((1, 6), dtype=mx.int32))
    document = json.loads(insp.to_json())
    jsonschema.validate(document, nbinspect.json_schema())
    assert document["model"]["framework"] == "mlx"
    widget = insp.widget()
    assert isinstance(widget, nbinspect.InspectWidget)
    assert "mlx" in insp.to_html()


def test_magic_inspects_an_mlx_model():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "nbinspect")
        shell.user_ns["net"] = MLP()
        insp = shell.run_line_magic("inspect_model", "net --input-shape 3,8 --batch-size 4 --optimizer adamw --text")
        assert insp.framework == "mlx"  # called directly, not as a cell's last line: the magic returns it
        kept = shell.run_line_magic("inspect_model", "net --input-shape 3,8 -o kept --text")
        result = shell.user_ns["kept"]
        assert result.framework == "mlx" and result.totals["flops"] == 2 * 3 * (8 * 32 + 32 * 16 + 16 * 4)
        assert kept is result
        shell.user_ns["mx"] = mx
        outcome = shell.run_cell("%%inspect_model net -o watched --text\nout = net(mx.zeros((2, 8)))")
        assert outcome.success, outcome.error_in_exec
        watched = shell.user_ns["watched"]
        assert watched.framework == "mlx" and list(watched.flow["name"]) == [
            "",
            "layers.0",
            "drop",
            "layers.1",
            "drop",
            "layers.2",
        ]
        assert type(shell.user_ns["net"]) is MLP
    finally:
        InteractiveShell.clear_instance()


# ------------------------------------------------------------------ npz files


def test_npz_reader_reads_numpy_and_refuses_what_needs_pickle(tmp_path):
    from nbinspect import CheckpointError

    np.savez_compressed(tmp_path / "c.npz", a=np.arange(6, dtype=np.float32).reshape(2, 3), n=np.arange(4))
    frame = nbinspect.stats(tmp_path / "c.npz").set_index("name")
    assert frame.loc["a", "mean"] == 2.5 and frame.loc["n", "max"] == 3
    np.savez(tmp_path / "f.npz", f=np.asfortranarray(np.arange(6.0).reshape(2, 3)), big=np.arange(3, dtype=">f4"))
    source = nbinspect.load_checkpoint(tmp_path / "f.npz")
    values = {t.name: t.values() for t in source.tensors}
    assert torch.equal(values["f"], torch.arange(6.0, dtype=torch.float64).reshape(2, 3))
    assert values["big"].tolist() == [0.0, 1.0, 2.0]

    np.savez(tmp_path / "obj.npz", o=np.array([{"x": 1}], dtype=object))
    with pytest.raises(CheckpointError, match=r"obj\.npz: array 'o': holds Python objects.*refused"):
        nbinspect.params(tmp_path / "obj.npz")
    data = (tmp_path / "f.npz").read_bytes()
    (tmp_path / "cut.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.npz"):
        nbinspect.params(tmp_path / "cut.npz")


def test_every_mlx_frame_and_total_is_declared_in_the_schema(lm):
    from nbinspect import schema

    for insp in (nbinspect.inspect(lm), nbinspect.trace(lm, mx.zeros((1, 5), dtype=mx.int32))):
        for key, frame in insp.frames.items():
            schema.FRAME_KEYS[key].validate(frame)
        assert set(insp.totals) <= set(schema.TOTALS)
    schema.MEMORY.validate(nbinspect.memory(lm, input=(1, 5), input_dtype="int32"))


@pytest.mark.parametrize("bits", [4, 8])
def test_a_quantized_linear_counts_its_logical_weights_and_flops(bits):
    """issue 26 (seed 003): a QuantizedLinear's packed uint32 words are 32 // bits weights each;
    its per-group scales and biases are settings, not parameters."""
    mx.random.seed(0)
    model = nn.Sequential(nn.Linear(128, 128))
    original = np.array(model.layers[0].weight)
    nn.quantize(model, group_size=64, bits=bits)
    insp = nbinspect.inspect(model, input=(1, 128), stats=False)
    params = insp.params.set_index("name")
    assert insp.totals["total_params"] == 128 * 128 + 128
    assert params.loc["layers.0.weight", "numel"] == 128 * 128
    assert list(params.loc["layers.0.weight", "shape"]) == [128, 128]
    assert params.loc["layers.0.weight", "bytes"] == 128 * 128 * bits // 8  # the packed words
    assert set(params.loc[["layers.0.scales", "layers.0.biases"], "kind"]) == {"buffer"}
    assert insp.totals["flops"] == 2 * 128 * 128  # batch 1, as torch counts addmm (bias aside)
    # the values read are the dequantized weights: unpacked by hand (each uint32 word holds
    # 32 // bits codes, lowest bits first; weight = code * scale + bias per group of 64)
    from nbinspect.backends.mlx.source import from_mlx_module

    layer = model.layers[0]
    words = np.array(layer.weight).astype(np.uint64)
    codes = (words[..., None] >> (bits * np.arange(32 // bits, dtype=np.uint64))) & ((1 << bits) - 1)
    codes = codes.reshape(128, 128).astype(np.float64)
    scales = np.repeat(np.array(layer.scales, dtype=np.float64), 64, axis=1)
    biases = np.repeat(np.array(layer.biases, dtype=np.float64), 64, axis=1)
    weight = next(t for t in from_mlx_module(model).tensors if t.name == "layers.0.weight").values()
    assert weight.shape == (128, 128)
    np.testing.assert_allclose(weight.double().numpy(), codes * scales + biases, rtol=1e-6, atol=1e-7)
    assert np.all(np.abs(weight.numpy() - original) <= np.abs(scales) + 1e-6)  # within a step of the original
