"""Forward-pass trace: shapes against hand-known values, FLOPs against analytic formulas,
saved-tensor bytes against the autograd graph, inputs/outputs of every kind, the flow view."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import jsonschema
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import nbinspect
from nbinspect import examples, schema

from ..trace_support import graph_saved_bytes


def _row(insp, name):
    rows = insp.layers[insp.layers["name"] == name]
    assert len(rows) == 1, name
    return rows.iloc[0]


def _out(insp, name):
    return _row(insp, name)["output_shapes"]


# --- shapes -------------------------------------------------------------------------------


def test_cnn_shapes_by_hand():
    insp = nbinspect.trace(examples.build("cnn"), examples.example_input("cnn"))
    assert _row(insp, "")["input_shapes"] == [(2, 3, 32, 32)]
    assert _out(insp, "features.0") == [(2, 8, 32, 32)]
    assert _out(insp, "features.3") == [(2, 8, 16, 16)]  # MaxPool2d(2)
    assert _out(insp, "features.4") == [(2, 16, 16, 16)]
    assert _out(insp, "features.7") == [(2, 16, 1, 1)]  # AdaptiveAvgPool2d(1)
    assert _out(insp, "classifier.0") == [(2, 16)]  # Flatten
    assert _out(insp, "") == [(2, 10)]
    assert _row(insp, "")["output_dtypes"] == ["float32"]


def test_tiny_lm_shapes_by_hand():
    insp = nbinspect.trace(examples.build("tiny_lm"), examples.example_input("tiny_lm"))
    assert _row(insp, "tok_emb")["input_shapes"] == [(2, 16)]
    assert _out(insp, "tok_emb") == [(2, 16, 64)]
    assert _out(insp, "pos_emb") == [(16, 64)]
    assert _out(insp, "blocks.1.attn.qkv") == [(2, 16, 192)]
    assert _out(insp, "blocks.1.mlp.0") == [(2, 16, 256)]
    assert _out(insp, "lm_head") == [(2, 16, 256)]
    assert _row(insp, "blocks")["calls"] == 0  # a ModuleList is iterated, never called
    assert insp.io["input"] == [{"path": "0", "shape": [2, 16], "dtype": "int64"}]
    assert insp.io["output"] == [{"path": "output", "shape": [2, 16, 256], "dtype": "float32"}]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mlp", {"body.0": [(4, 64)], "body.3": [(4, 64)], "head": [(4, 10)]}),
        ("frozen", {"backbone.0": [(4, 32)], "backbone.1": [(4, 32)], "head": [(4, 3)], "": [(4, 3)]}),
        ("shared", {"inp": [(4, 16)], "shared": [(4, 16)], "again": [(4, 16)], "out": [(4, 4)]}),
    ],
)
def test_small_zoo_shapes_by_hand(name, expected):
    insp = nbinspect.trace(examples.build(name), examples.example_input(name))
    assert {path: _out(insp, path) for path in expected} == expected


def test_shared_module_gets_one_flow_row_per_call():
    insp = nbinspect.trace(examples.build("shared"), examples.example_input("shared"))
    flow = insp.flow
    shared = flow[flow["name"] == "shared"]
    assert list(shared["call"]) == [0, 1]
    assert list(flow["name"]) == ["", "inp", "shared", "shared", "out"]
    for path in ("shared", "again"):  # the same module object at two paths
        assert _row(insp, path)["calls"] == 2
        assert _row(insp, path)["flops"] == 2 * (2 * 4 * 16 * 16)


def test_every_zoo_model_traces_and_validates(zoo_name):
    insp = nbinspect.trace(examples.build(zoo_name), examples.example_input(zoo_name))
    schema.LAYERS.validate(insp.layers)
    schema.FLOW.validate(insp.frames["flow"])
    assert (insp.flow["status"] == "ok").all()
    called = insp.layers[insp.layers["calls"] > 0]
    assert called["output_shapes"].notna().all()
    validator = jsonschema.Draft202012Validator(nbinspect.json_schema())
    document = json.loads(insp.to_json())
    validator.validate(document)
    assert document["input"] == insp.io["input"] and document["output"][0]["shape"]


# --- FLOPs against formulas -----------------------------------------------------------------


def test_linear_flops():
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10, bias=False))
    insp = nbinspect.trace(model, (5, 32))
    assert _row(insp, "0")["flops"] == 2 * 5 * 32 * 64  # multiply-add = 2 FLOPs; bias not counted
    assert _row(insp, "2")["flops"] == 2 * 5 * 64 * 10
    assert insp.totals["flops"] == _row(insp, "")["flops"] == 2 * 5 * 32 * 64 + 2 * 5 * 64 * 10


@pytest.mark.parametrize(("groups", "stride", "padding"), [(1, 1, 1), (2, 2, 0), (4, 1, 2)])
def test_conv_flops(groups, stride, padding):
    conv = nn.Conv2d(8, 16, kernel_size=3, stride=stride, padding=padding, groups=groups)
    insp = nbinspect.trace(conv, (2, 8, 20, 20))
    (out_shape,) = _out(insp, "")
    out_numel = out_shape[0] * out_shape[1] * out_shape[2] * out_shape[3]
    assert insp.totals["flops"] == 2 * out_numel * (8 // groups) * 3 * 3


class _Attention(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@pytest.mark.parametrize("math_backend", [False, True])
def test_attention_flops(math_backend):
    """Counted on CPU's flash kernel (not in torch's registry) and on the math backend alike."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, h, t, d = 2, 4, 16, 8
    shape = (b, h, t, d)
    if math_backend:
        with sdpa_kernel([SDPBackend.MATH]):
            insp = nbinspect.trace(_Attention(), shape, shape, shape)
    else:
        insp = nbinspect.trace(_Attention(), shape, shape, shape)
    assert insp.totals["flops"] == 4 * b * h * t * t * d  # QK^T and AV; causal mask not discounted


class _MaskedAttention(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.3) + F.scaled_dot_product_attention(
            q[:, :, :1], k, v, attn_mask=mask[:1], scale=0.3
        )


def test_attention_flops_with_keyword_arguments():
    """The mask and scale reach the attention op as keywords: the counter passes them to the
    registry's formula through its shape cache (two query lengths: a miss each, then hits)."""
    b, h, t, d = 2, 2, 8, 16
    q = torch.randn(b, h, t, d)
    mask = torch.ones(t, t, dtype=torch.bool).tril()
    for _ in range(2):
        insp = nbinspect.trace(_MaskedAttention(), q, q, q, mask)
        assert insp.totals["flops"] == 4 * b * h * t * t * d + 4 * b * h * 1 * t * d


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm", "baddbmm"])
def test_direct_matmul_formulas_equal_torchs_registry(op):
    """The counter's own formulas for the matrix multiplies give the registry's count on
    every shape (its wrappers are too slow to call per op)."""
    from torch.utils.flop_counter import flop_registry

    from nbinspect.backends.torch.flops import DIRECT_FORMULAS

    packet = getattr(torch.ops.aten, op)
    gen = torch.Generator().manual_seed(0)
    for _ in range(50):
        b, m, k, n = (int(v) for v in torch.randint(1, 40, (4,), generator=gen))
        batch = (b,) if op in ("bmm", "baddbmm") else ()
        x, y = torch.randn(*batch, m, k), torch.randn(*batch, k, n)
        args = (torch.randn(*batch, m, n), x, y) if op.startswith(("add", "badd")) else (x, y)
        out = packet(*args)
        assert DIRECT_FORMULAS[packet](args, None, out) == flop_registry[packet](*args, out_val=out) > 0


def test_tiny_lm_flops_match_the_architecture():
    B, T, d, V, L = 2, 16, 64, 256, 2
    insp = nbinspect.trace(examples.build("tiny_lm"), examples.example_input("tiny_lm"))
    per_block = 2 * B * T * d * 3 * d + 2 * B * T * d * d + 4 * B * T * T * d + 2 * (2 * B * T * d * 4 * d)
    assert _row(insp, "blocks.0")["flops"] == per_block
    assert insp.totals["flops"] == L * per_block + 2 * B * T * d * V


def test_flops_and_saved_bytes_add_up(zoo_name):
    insp = nbinspect.trace(examples.build(zoo_name), examples.example_input(zoo_name), backward=True)
    flow = insp.frames["flow"]
    root = _row(insp, "")
    for column in ("flops", "activation_bytes", "backward_flops"):
        assert root[column] == insp.totals[column]
    assert flow["own_flops"].sum() == root["flops"]
    assert flow["own_activation_bytes"].sum() == root["activation_bytes"]
    for call in flow.itertuples():
        children = flow[flow["parent"] == call.index]
        assert call.flops == call.own_flops + children["flops"].sum()
        assert call.activation_bytes == call.own_activation_bytes + children["activation_bytes"].sum()
    assert flow["backward_flops"].iloc[0] == root["backward_flops"]


def test_backward_flops_of_an_mlp():
    """Backward of a Linear is two matmuls (grad input, grad weight), one when its input
    needs no gradient (the model's input)."""
    model = examples.build("mlp")
    insp = nbinspect.trace(model, examples.example_input("mlp"), backward=True)
    assert _row(insp, "body.0")["backward_flops"] == 2 * 4 * 32 * 64
    assert _row(insp, "body.2")["backward_flops"] == 2 * (2 * 4 * 64 * 64)
    assert _row(insp, "head")["backward_flops"] == 2 * (2 * 4 * 64 * 10)
    assert all(p.grad is None for p in model.parameters())


def test_coverage_note_lists_ops_not_counted():
    insp = nbinspect.trace(examples.build("tiny_lm"), examples.example_input("tiny_lm"))
    note = insp.totals["flops_note"]
    assert "native_layer_norm x5" in note and "gelu x2" in note
    assert "addmm" not in note and "view" not in note


def test_a_compiled_function_inside_the_model_does_not_compile_the_flop_counter():
    """The counter skips torch's per-op dynamo wrapper and marks its own code instead: a
    compiled function that the model calls runs with dynamo active, and dynamo must not
    trace the counter's dispatch handler (without the mark it traces ~14 of its frames,
    breaking the graph at every op)."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    from torch.utils.flop_counter import FlopCounterMode

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    @torch.compile(backend=backend)
    def head(x):
        return torch.relu(x @ x.T) + 1

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(8, 8)

        def forward(self, x):
            return head(self.linear(x))

    model, x = Model(), torch.randn(4, 8)
    try:
        counters.clear()
        insp = nbinspect.trace(model, x)
        assert graphs == [] and not counters["frames"]  # no frame of the counter traced by dynamo
        with FlopCounterMode(display=False) as reference:
            model(x)
        assert insp.totals["flops"] == reference.get_total_flops() == 2 * 4 * 8 * 8 + 2 * 4 * 8 * 4
    finally:
        torch._dynamo.reset()


def test_flops_can_be_skipped():
    insp = nbinspect.trace(examples.build("mlp"), examples.example_input("mlp"), flops=False)
    assert insp.totals["flops"] is None and insp.layers["flops"].isna().all()
    assert insp.layers["output_shapes"].notna().all()


# --- saved tensors --------------------------------------------------------------------------


def test_mlp_saved_bytes_by_hand():
    """Each ReLU saves its output (4x64 float32 = 1 KB); the Linear after it saves that same
    tensor (counted once) and its weight (a parameter, not an activation)."""
    insp = nbinspect.trace(examples.build("mlp"), examples.example_input("mlp"))
    assert _row(insp, "body.1")["activation_bytes"] == 4 * 64 * 4
    assert _row(insp, "body.2")["activation_bytes"] == 0
    assert insp.totals["activation_bytes"] == 2 * 4 * 64 * 4


def test_saved_bytes_match_the_autograd_graph(zoo_name):
    model = examples.build(zoo_name).train()
    x = examples.example_input(zoo_name)
    insp = nbinspect.trace(model, x)
    with torch.random.fork_rng():
        out = model(x)
    assert insp.totals["activation_bytes"] == graph_saved_bytes(out, model, [x])


class _Dropped(nn.Module):
    def forward(self, x):
        return (x + 1).sin()  # sin saves its input, a fresh storage freed with the result


class _DropsBranches(nn.Module):
    """Calls whose results the forward drops: each saved storage is freed as the next call
    allocates one of the same size, which the allocator readily puts at the same address."""

    def __init__(self, n: int):
        super().__init__()
        self.calls = nn.ModuleList(_Dropped() for _ in range(n))

    def forward(self, x):
        for call in self.calls:
            call(x)
        return x * 2


def test_a_storage_freed_during_the_pass_does_not_hide_the_next_at_its_address():
    """Every call saved one 64 KB storage. Known by address alone, a storage the allocator
    put where a dropped one had been went uncounted (0 bytes for that call)."""
    n, x = 24, torch.randn(16384, requires_grad=True)
    for _ in range(3):
        flow = nbinspect.trace(_DropsBranches(n), x).frames["flow"]
        saved = flow.loc[flow["name"].str.startswith("calls."), "own_activation_bytes"].tolist()
        assert saved == [16384 * 4] * n


# --- inputs and outputs ---------------------------------------------------------------------


class _Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(6, 3)

    def forward(self, x, y=None, *, extra=None):
        out = self.a(x)
        if y is not None:
            out = out + self.b(y)
        if extra is not None:
            out = out + self.a(extra["z"][0])
        return out


@pytest.mark.parametrize(
    "call",
    [
        lambda m: nbinspect.trace(m, torch.zeros(2, 4), torch.zeros(2, 6)),
        lambda m: nbinspect.trace(m, (2, 4), y=(2, 6)),
        lambda m: nbinspect.inspect(m, input=[(2, 4), torch.zeros(2, 6)]),
        lambda m: nbinspect.inspect(m, input={"x": (2, 4), "y": (2, 6)}),
    ],
)
def test_input_forms(call):
    insp = call(_Pair())
    assert _row(insp, "b")["input_shapes"] == [(2, 6)]
    assert _out(insp, "") == [(2, 3)]


def test_nested_input_containers():
    insp = nbinspect.trace(_Pair(), (2, 4), extra={"z": [(2, 4)]})
    assert _row(insp, "a")["calls"] == 2
    assert _row(insp, "")["input_shapes"] == [(2, 4), (2, 4)]  # positional, then keyword
    assert [r["path"] for r in insp.io["input"]] == ["0", "extra.z.0"]


def test_integer_inputs_need_a_dtype():
    model = examples.build("tiny_lm")
    with pytest.raises(nbinspect.TraceError, match=r"tok_emb \(Embedding\).*input_dtype=torch.long"):
        nbinspect.trace(model, (2, 16))
    insp = nbinspect.trace(model, (2, 16), input_dtype=torch.long)
    assert _out(insp, "") == [(2, 16, 256)]


@dataclasses.dataclass
class _Result:
    logits: torch.Tensor
    hidden: tuple
    label: str
    loss: torch.Tensor | None = None


class _ManyOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return {"result": _Result(h, (h, None), "ok"), "count": 3, "nothing": None}


def test_outputs_of_every_kind_are_recorded():
    insp = nbinspect.trace(_ManyOutputs(), (2, 4))
    assert insp.io["output"] == [
        {"path": "result.logits", "shape": [2, 4], "dtype": "float32"},
        {"path": "result.hidden.0", "shape": [2, 4], "dtype": "float32"},
        {"path": "result.hidden.1", "type": "NoneType"},
        {"path": "result.label", "type": "str"},
        {"path": "result.loss", "type": "NoneType"},
        {"path": "count", "type": "int"},
        {"path": "nothing", "type": "NoneType"},
    ]
    assert _out(insp, "") == [(2, 4), (2, 4)]
    jsonschema.Draft202012Validator(nbinspect.json_schema()).validate(insp.to_dict())


# --- the flow view --------------------------------------------------------------------------


def test_flow_prints_as_staged_text(golden):
    insp = nbinspect.trace(examples.build("tiny_lm"), examples.example_input("tiny_lm"), backward=True)
    text = str(insp.flow)
    assert text.index("Inputs") < text.index("blocks.0") < text.index("Outputs")
    golden("flow_tiny_lm.txt", text + "\n")


def test_flow_is_still_a_frame():
    insp = nbinspect.trace(examples.build("mlp"), examples.example_input("mlp"))
    flow = insp.flow
    assert list(flow.columns) == schema.FLOW.names
    assert type(flow[flow["depth"] == 1]) is not type(flow)  # slices are plain frames
    assert "head" in flow.to_string()


def test_untraced_inspection_has_no_flow():
    insp = nbinspect.inspect(examples.build("mlp"))
    assert insp.layers["calls"].isna().all()
    with pytest.raises(ValueError, match="no traced forward pass"):
        insp.flow


def test_a_state_dict_cannot_be_traced():
    state = examples.build("mlp").state_dict()
    with pytest.raises(TypeError, match="needs a live torch.nn.Module, got a checkpoint or state_dict"):
        nbinspect.inspect(state, input=(4, 32))
    with pytest.raises(TypeError, match="needs a live torch.nn.Module"):
        nbinspect.memory(state, input=(4, 32))


def test_a_container_that_never_runs_holds_its_childrens_work():
    import torch

    import nbinspect
    from nbinspect import examples

    layers = nbinspect.trace(examples.build("tiny_lm"), (2, 16), input_dtype=torch.long).layers.set_index("name")
    blocks = layers.loc["blocks"]  # a ModuleList: TinyLM.forward calls its items, never it
    assert blocks["calls"] == 0 and blocks["output_shapes"] is None
    for column in ("flops", "activation_bytes"):
        assert blocks[column] == layers.loc["blocks.0", column] + layers.loc["blocks.1", column] > 0


# --- watch (the %%inspect_model cell magic) -----------------------------------------------


def test_watch_totals_add_up_every_call_the_block_made():
    """Totals over both calls (the totals code the MLX watch shares): FLOPs as two separate
    traces, input bytes by hand, and activations as the two traces plus the inputs, which
    the first Linear saves and a watch cannot tell from the model's own tensors."""
    from nbinspect.backends.torch.watch import watch

    model, x3, x5 = examples.build("mlp"), torch.randn(3, 32), torch.randn(5, 32)
    with watch(model) as watched:
        model(x3)
        model(x5)
    one, two = nbinspect.trace(model, x3).totals, nbinspect.trace(model, x5).totals
    assert watched.totals["model_calls"] == 2
    by_hand = 2 * (3 + 5) * (32 * 64 + 64 * 64 + 64 * 10)  # 2 FLOPs per multiply-add, both calls
    assert watched.totals["flops"] == one["flops"] + two["flops"] == by_hand
    assert watched.totals["input_bytes"] == (3 + 5) * 32 * 4
    assert watched.totals["activation_bytes"] == one["activation_bytes"] + two["activation_bytes"] + (3 + 5) * 32 * 4
    with watch(model, flops=False) as unwatched:
        model(x3)
    assert unwatched.totals["flops"] is None and unwatched.totals["model_calls"] == 1


def test_flop_counter_is_a_plain_dispatch_mode_without_a_mode_key():
    """The counter's empty ``_mode_key`` slot (cheaper for torch to find missing on each push)
    reads as missing, so torch pushes it as a user mode on the dispatch stack, not as an infra
    mode, and pops it from there."""
    from nbinspect.backends.torch.flops import FlopCounter
    from nbinspect.core.trace import OWN_FLOPS

    counter = FlopCounter([], [0] * 15, [])
    assert not hasattr(counter, "_mode_key") and "_mode_key" not in vars(counter)
    depth = torch._C._len_torch_dispatch_stack()
    with counter:
        assert torch._C._len_torch_dispatch_stack() == depth + 1
        assert torch._C._get_dispatch_stack_at(depth) is counter
        torch.ones(2, 3) @ torch.ones(3, 4)
    assert torch._C._len_torch_dispatch_stack() == depth
    assert counter.outside[OWN_FLOPS] == 2 * 2 * 3 * 4  # the ops ran outside any call


class _FailsAndGoesOn(nn.Module):
    """Calls that raise, each caught by the forward: a caught exception is freed, and the
    next one may be made at its address (the same id)."""

    def __init__(self, n: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            with contextlib.suppress(RuntimeError):
                layer(torch.zeros(2, 5))  # wrong width: this Linear raises
        return self.layers[0](x)


def test_each_call_that_raised_is_failed_not_interrupted():
    """A call that raised is "failed"; "interrupted" is for a call an exception from a call
    inside it passed through. Known by id alone, an exception made where a caught one had
    been looked like that one passing through again."""
    n = 24
    for _ in range(3):
        flow = nbinspect.trace(_FailsAndGoesOn(n), torch.randn(2, 4)).frames["flow"]
        assert flow["status"].tolist() == ["ok"] + ["failed"] * n + ["ok"]
