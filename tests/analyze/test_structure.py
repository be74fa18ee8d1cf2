"""Structure analyzers against hand counts, for the zoo and for awkward models."""

from __future__ import annotations

import random

import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples, schema
from tests.conftest import assert_unchanged, model_state


def linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def conv(i: int, o: int, k: int, dims: int = 2) -> int:
    return i * o * k**dims + o


# Hand counts: (unique parameters, trainable, by path, buffer elements, buffer bytes)
BLOCK = 2 * 2 * 64 + linear(64, 192) + linear(64, 64) + linear(64, 256) + linear(256, 64)
HAND = {
    "cnn": (
        conv(3, 8, 3) + 2 * 8 + conv(8, 16, 3) + 2 * 16 + linear(16, 10),
        None,
        None,
        8 * 2 + 1 + 16 * 2 + 1,
        (8 * 2 + 16 * 2) * 4 + 2 * 8,
    ),
    "mlp": (linear(32, 64) + linear(64, 64) + linear(64, 10), None, None, 0, 0),
    "tiny_lm": (
        256 * 64 + 32 * 64 + 2 * BLOCK + 2 * 64,
        None,
        256 * 64 + 32 * 64 + 2 * BLOCK + 2 * 64 + 256 * 64,
        0,
        0,
    ),
    "shared": (
        linear(8, 16) + linear(16, 16) + linear(16, 4),
        None,
        linear(8, 16) + 2 * linear(16, 16) + linear(16, 4),
        0,
        0,
    ),
    "frozen": (
        linear(16, 32) + 2 * 32 + linear(32, 3) + 1,
        linear(32, 3) + 1,
        None,
        32 * 2 + 1 + 3 + 1,
        32 * 2 * 4 + 8 + 3 * 1 + 1 * 2,
    ),
}


def test_totals_match_hand_counts(zoo_name):
    total, trainable, by_path, buffers, buffer_bytes = HAND[zoo_name]
    t = nbinspect.totals(examples.build(zoo_name))
    assert set(t) == set(schema.STRUCTURE_TOTALS)
    assert t["total_params"] == total
    assert t["trainable_params"] == (total if trainable is None else trainable)
    assert t["non_trainable_params"] == t["total_params"] - t["trainable_params"]
    assert t["total_params_by_path"] == (total if by_path is None else by_path)
    assert t["buffer_numel"] == buffers
    assert t["buffer_bytes"] == buffer_bytes
    assert t["param_bytes"] == 4 * total  # every zoo parameter is float32


def test_totals_agree_with_torch_own_counters(zoo_name):
    model = examples.build(zoo_name)
    t = nbinspect.totals(model)
    # model.parameters() de-duplicates by object, which is right for the zoo's ties
    assert t["total_params"] == sum(p.numel() for p in model.parameters())
    assert t["num_modules"] == len(list(model.modules()))


def test_frames_follow_schema(zoo_name):
    model = examples.build(zoo_name)
    schema.PARAMS.validate(nbinspect.params(model))
    schema.LAYERS.validate(nbinspect.layers(model))
    schema.BY_TYPE.validate(nbinspect.by_type(model))


def test_analyzers_leave_model_unchanged(zoo_name):
    model = examples.build(zoo_name)
    model.eval() if zoo_name == "cnn" else model.train()
    before = model_state(model)
    nbinspect.inspect(model)
    nbinspect.params(model), nbinspect.layers(model), nbinspect.by_type(model), nbinspect.totals(model)
    assert_unchanged(before, model_state(model))


def test_tied_weight_listed_at_both_paths_counted_once():
    model = examples.build("tiny_lm")
    p = nbinspect.params(model).set_index("name")
    assert p.loc["lm_head.weight", "tied_to"] == "tok_emb.weight"
    assert p["tied_to"].notna().sum() == 1
    layers = nbinspect.layers(model).set_index("name")
    # each subtree that holds the tensor counts it; the root counts it once
    assert layers.loc["lm_head", "params"] == 256 * 64
    assert layers.loc["tok_emb", "params"] == 256 * 64
    assert layers.loc["", "params"] == HAND["tiny_lm"][0]


def test_tied_by_storage_not_only_by_object():
    a, b = nn.Linear(4, 4), nn.Linear(4, 4)
    b.weight = nn.Parameter(a.weight.data)  # a different Parameter over the same memory
    model = nn.Sequential(a, b)
    t = nbinspect.totals(model)
    assert t["total_params"] == 16 + 4 + 4
    assert t["total_params_by_path"] == 2 * (16 + 4)
    assert nbinspect.params(model).set_index("name").loc["1.weight", "tied_to"] == "0.weight"


def test_module_registered_twice_is_a_row_with_alias():
    layers = nbinspect.layers(examples.build("shared")).set_index("name")
    assert layers.loc["again", "alias_of"] == "shared"
    assert pd_missing(layers.loc["shared", "alias_of"])
    assert layers.loc["again", "params"] == layers.loc["shared", "params"] == linear(16, 16)


def pd_missing(value) -> bool:
    import pandas as pd

    return value is None or value is pd.NA


def test_layer_rows_preorder_with_parents_and_depths():
    model = examples.build("cnn")
    layers = nbinspect.layers(model)
    assert list(layers["name"]) == [n for n, _ in model.named_modules()]
    assert list(layers["index"]) == list(range(len(layers)))
    row = layers.set_index("name").loc["features.4"]
    assert (row["parent"], row["depth"], row["type"], row["is_leaf"]) == ("features", 2, "Conv2d", True)
    assert row["params"] == row["own_params"] == conv(8, 16, 3)
    root = layers.iloc[0]
    assert root["name"] == "" and pd_missing(root["parent"]) and root["own_params"] == 0


def test_raw_parameter_on_parent_with_children():
    layers = nbinspect.layers(examples.build("frozen")).set_index("name")
    root = layers.loc[""]
    assert root["own_params"] == 1  # the temperature
    assert root["frozen_params"] == linear(16, 32) + 2 * 32
    assert layers.loc["backbone", "trainable_params"] == 0
    assert layers.loc["head", "frozen_params"] == 0


def test_parameter_list_and_dict():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.plist = nn.ParameterList([nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(2, 2))])
            self.pdict = nn.ParameterDict({"a": nn.Parameter(torch.zeros(5))})

    model = Holder()
    params = nbinspect.params(model)
    assert set(params["name"]) == {"plist.0", "plist.1", "pdict.a"}
    layers = nbinspect.layers(model).set_index("name")
    assert layers.loc["plist", "params"] == 7 and layers.loc["plist", "attrs"] == {"length": 2}
    assert layers.loc["pdict", "own_params"] == 5


def test_mixed_dtypes_bytes():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4).to(torch.bfloat16), nn.Linear(4, 2).half())
    model.register_buffer("codes", torch.zeros(10, dtype=torch.int8))
    model.register_buffer("scale", torch.zeros(3, dtype=torch.float64))
    t = nbinspect.totals(model)
    assert t["param_bytes"] == 20 * 4 + 20 * 2 + 10 * 2
    assert t["buffer_bytes"] == 10 * 1 + 3 * 8
    p = nbinspect.params(model).set_index("name")
    assert p.loc["1.weight", "dtype"] == "bfloat16" and p.loc["codes", "dtype"] == "int8"
    assert p.loc["codes", "kind"] == schema.BUFFER and not p.loc["codes", "requires_grad"]


def test_meta_device_counts_without_memory():
    with torch.device("meta"):
        model = examples.TinyLM()
    t = nbinspect.totals(model)
    assert t["total_params"] == HAND["tiny_lm"][0]
    assert t["total_params_by_path"] == HAND["tiny_lm"][2]
    assert set(nbinspect.params(model)["device"]) == {"meta"}


def test_distinct_meta_tensors_are_not_mistaken_for_ties():
    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    assert nbinspect.params(model)["tied_to"].isna().all()
    assert nbinspect.totals(model)["total_params"] == 2 * linear(8, 8)


def test_empty_tensors_are_not_mistaken_for_ties():
    model = nn.Module()
    model.a = nn.Parameter(torch.zeros(0))
    model.b = nn.Parameter(torch.zeros(0, 3))
    assert nbinspect.params(model)["tied_to"].isna().all()


def test_zero_parameter_model():
    insp = nbinspect.inspect(nn.ReLU())
    assert insp.totals["total_params"] == 0 and insp.totals["num_modules"] == 1
    assert len(insp.layers) == 1 and len(insp.params) == 0 and len(insp.by_type) == 0
    assert "ReLU" in str(insp)


def test_lazy_module_does_not_crash():
    params = nbinspect.params(nn.Sequential(nn.LazyLinear(4)))
    assert list(params["numel"]) == [0, 0] and params["shape"].isna().all()


def test_by_type_shares_sum_to_100_and_count_ties_once():
    frame = nbinspect.by_type(examples.build("tiny_lm")).set_index("type")
    assert frame["params"].sum() == HAND["tiny_lm"][0]
    assert frame["share"].sum() == pytest.approx(100.0)
    assert frame.loc["Embedding", "params"] == 256 * 64 + 32 * 64
    assert frame.loc["Linear", "modules"] == 2 * 4 + 1
    assert frame.index[0] == "Linear"  # largest first


@pytest.mark.parametrize("bad", [5, None, [nn.Linear(2, 2)], object()])
def test_not_a_model_is_a_type_error(bad):
    with pytest.raises(TypeError, match="expected a torch.nn.Module"):
        nbinspect.inspect(bad)


def test_model_class_instead_of_instance_says_so():
    with pytest.raises(TypeError, match=r"class TinyLM itself.*TinyLM\(\.\.\.\)"):
        nbinspect.layers(examples.TinyLM)


LAYER_ATTRS = [
    (nn.Linear(3, 4, bias=False), {"in_features": 3, "out_features": 4, "bias": False}),
    (nn.Conv1d(2, 4, 3), {"in_channels": 2, "kernel_size": (3,), "bias": True}),
    (nn.Conv2d(3, 8, 3, stride=2, padding=1, groups=1), {"stride": (2, 2), "padding": (1, 1), "groups": 1}),
    (nn.Conv3d(2, 2, 3), {"kernel_size": (3, 3, 3)}),
    (nn.ConvTranspose2d(4, 2, 3, stride=2, output_padding=1), {"output_padding": (1, 1), "out_channels": 2}),
    (nn.BatchNorm2d(8, momentum=0.2), {"num_features": 8, "eps": 1e-5, "momentum": 0.2, "affine": True}),
    (nn.LayerNorm(16, eps=1e-6), {"normalized_shape": (16,), "eps": 1e-6}),
    (nn.GroupNorm(2, 8), {"num_groups": 2, "num_channels": 8}),
    (nn.RMSNorm(16, eps=1e-6), {"normalized_shape": (16,), "eps": 1e-6}),
    (nn.Embedding(10, 4, padding_idx=0), {"num_embeddings": 10, "embedding_dim": 4, "padding_idx": 0}),
    (nn.Dropout(0.3), {"p": 0.3}),
    (nn.GELU("tanh"), {"approximate": "tanh"}),
    (nn.LeakyReLU(0.2), {"negative_slope": 0.2}),
    (nn.Softmax(-1), {"dim": -1}),
    (nn.MaxPool2d(2), {"kernel_size": 2, "stride": 2}),
    (nn.AdaptiveAvgPool2d(1), {"output_size": 1}),
    (nn.MultiheadAttention(16, 4), {"embed_dim": 16, "num_heads": 4, "bias": True}),
    (nn.LSTM(8, 16, num_layers=2), {"hidden_size": 16, "num_layers": 2, "mode": "LSTM"}),
    (nn.GRU(8, 16, bidirectional=True), {"bidirectional": True, "input_size": 8}),
    (nn.Sequential(nn.ReLU(), nn.ReLU()), {"length": 2}),
]


@pytest.mark.parametrize(("module", "expected"), LAYER_ATTRS, ids=[type(m).__name__ for m, _ in LAYER_ATTRS])
def test_layer_attrs(module, expected):
    attrs = nbinspect.layers(module).iloc[0]["attrs"]
    assert {k: attrs.get(k) for k in expected} == expected


def test_plain_conv_has_no_output_padding():
    assert "output_padding" not in nbinspect.layers(nn.Conv2d(3, 3, 3)).iloc[0]["attrs"]


def test_custom_module_attrs_fallback():
    class Scaler(nn.Module):
        def __init__(self):
            super().__init__()
            self.factor = 2.5
            self.name = "scale"
            self.dtype = torch.float16  # torch's one value of its own: written by name
            self.table = {"not": "a scalar"}

    class Opaque(nn.Module):
        def extra_repr(self) -> str:
            return "mode=fast"

    assert nbinspect.layers(Scaler()).iloc[0]["attrs"] == {"factor": 2.5, "name": "scale", "dtype": "float16"}
    assert nbinspect.layers(Opaque()).iloc[0]["attrs"] == {"extra_repr": "mode=fast"}


def test_custom_module_with_broken_extra_repr():
    class Broken(nn.Module):
        def extra_repr(self) -> str:
            raise RuntimeError("boom")

    assert nbinspect.layers(Broken()).iloc[0]["attrs"] == {}


def test_garbage_collector_is_left_as_it_was():
    import gc

    model = examples.build("mlp")
    assert gc.isenabled()
    nbinspect.inspect(model, input=(2, 32))
    nbinspect.compare(model, model)
    assert gc.isenabled()
    gc.disable()
    try:
        nbinspect.inspect(model)
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(TypeError):
        nbinspect.inspect(42)
    assert gc.isenabled()


def _nested_untied() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(4, 6),
        nn.Sequential(nn.Conv1d(2, 3, 3), nn.BatchNorm1d(3), nn.Sequential(nn.Linear(6, 2, bias=False))),
        nn.LayerNorm(2),
    )
    model[1][1].requires_grad_(False)
    model.register_parameter("scale", nn.Parameter(torch.ones(3)))  # a parameter beside children
    return model


@pytest.mark.parametrize("name", ["nested", *examples.names()])
def test_layer_counts_agree_with_torch_per_module(name):
    """Every module path's subtree counts against torch's own per-module iterators, which
    de-duplicate by object (right for these models' ties)."""
    model = _nested_untied() if name == "nested" else examples.build(name)
    frame = nbinspect.layers(model).set_index("name")
    for path, m in model.named_modules(remove_duplicate=False):
        row = frame.loc[path]
        ps, bs = list(m.parameters()), list(m.buffers())
        assert row["params"] == sum(p.numel() for p in ps), path
        assert row["trainable_params"] == sum(p.numel() for p in ps if p.requires_grad), path
        assert row["param_bytes"] == sum(p.numel() * p.element_size() for p in ps), path
        assert row["buffer_bytes"] == sum(b.numel() * b.element_size() for b in bs), path
    # own parameters add up to the model's total: a tie is owned at its first path only
    assert frame["own_params"].sum() == sum(p.numel() for p in model.parameters())


def _direct_attrs(module: nn.Module) -> dict:
    """Layer attrs the direct way: the constants, then the facts each kind adds, tested on
    the module itself (layer_attrs keeps the class tests once per type)."""
    names = []
    for base in reversed(type(module).__mro__):
        names += [n for n in getattr(base, "__constants__", ()) if n not in names]
    attrs = {n: module.__dict__[n] for n in names if n in module.__dict__}
    attrs = {n: tuple(v) if isinstance(v, list) else v for n, v in attrs.items()}
    if isinstance(module, (nn.Linear, nn.Bilinear, nn.modules.conv._ConvNd)):
        attrs["bias"] = module.bias is not None
    if isinstance(module, nn.modules.conv._ConvNd) and not module.transposed:
        attrs.pop("output_padding", None)
    if isinstance(module, nn.MultiheadAttention):
        attrs.update(embed_dim=module.embed_dim, num_heads=module.num_heads, head_dim=module.head_dim)
        attrs.update(dropout=module.dropout, kdim=module.kdim, vdim=module.vdim)
        attrs.update(bias=module.in_proj_bias is not None, add_bias_kv=module.bias_k is not None)
    if isinstance(module, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
        attrs["length"] = len(module)
    return attrs


@pytest.mark.parametrize("zoo_name", examples.names())
def test_layer_attrs_equal_a_direct_reading(zoo_name):
    """Every torch.nn module of every example, and the LAYER_ATTRS modules: the same keys in
    the same order and the same values as reading each module directly."""
    modules = [m for _, m in examples.build(zoo_name).named_modules()] + [m for m, _ in LAYER_ATTRS]
    seen = 0
    for module in modules:
        if type(module).__module__.startswith("torch.nn"):
            got = nbinspect.layers(module).iloc[0]["attrs"]
            assert list(got.items()) == list(_direct_attrs(module).items()), type(module).__name__
            seen += 1
    assert seen > len(LAYER_ATTRS)


def test_params_counts_equal_torch():
    """numel, bytes and shape of every parameter and buffer path equal torch's own, over
    dtypes of four element sizes, a 0-d, an empty and a bool tensor, a tied weight and meta."""
    model = nn.Module()
    model.a = nn.Linear(3, 5).to(torch.float16)
    model.b = nn.Embedding(7, 2).to(torch.bfloat16)
    model.b.register_buffer("steps", torch.tensor(3, dtype=torch.int64))
    model.b.register_buffer("mask", torch.ones(2, 3, 4, dtype=torch.bool))
    model.b.register_buffer("none", torch.empty(0, 4, dtype=torch.float64))
    model.c = nn.Linear(2, 2, device="meta")
    model.d = nn.Linear(5, 3)
    model.e = nn.Linear(5, 3)
    model.e.weight = model.d.weight
    frame = nbinspect.params(model).set_index("name")
    named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    assert sorted(frame.index) == sorted(n for n, _ in named)
    for name, t in named:
        row = frame.loc[name]
        assert (row["numel"], row["bytes"], row["shape"]) == (t.numel(), t.numel() * t.element_size(), tuple(t.shape))


@pytest.mark.parametrize("name", ["nested", *examples.names()])
def test_by_type_and_totals_agree_with_torch(name):
    """Parameters by the type of the module that first holds them, and the model's totals,
    against torch's own iterators (which de-duplicate by object: right for these ties)."""
    model = _nested_untied() if name == "nested" else examples.build(name)
    expected: dict[str, list[int]] = {}
    seen: set[int] = set()
    for m in model.modules():  # each module once, in pre-order: a tie at its first holder
        for p in m.parameters(recurse=False):
            if id(p) not in seen:
                seen.add(id(p))
                counts = expected.setdefault(type(m).__name__, [0, 0])
                counts[0] += p.numel()
                counts[1] += p.numel() * p.element_size()
    frame = nbinspect.by_type(model)
    got = {row.type: [row.params, row.param_bytes] for row in frame.itertuples()}
    assert got == {k: v for k, v in expected.items() if v[0]}
    t = nbinspect.totals(model)
    assert t["trainable_params"] == sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert t["param_bytes"] == sum(p.numel() * p.element_size() for p in model.parameters())
    assert t["buffer_numel"] == sum(b.numel() for b in model.buffers())
    assert t["buffer_bytes"] == sum(b.numel() * b.element_size() for b in model.buffers())


@pytest.mark.parametrize("name", ["nested", *examples.names()])
def test_own_counts_give_what_the_general_count_gives(name):
    """layers, by_type and totals from the modules' own counts (every storage at one path)
    equal the general count over distinct storages, forced by leaving the own counts out."""
    from nbinspect.analyze import structure

    model = _nested_untied() if name == "nested" else examples.build(name)
    fast, general = nbinspect.backends.as_source(model), nbinspect.backends.as_source(model)
    general.derived["structure.own"] = None
    for frame in (structure.layers, structure.by_type):
        pd.testing.assert_frame_equal(frame(fast), frame(general), check_exact=True)
    assert structure.totals(fast) == structure.totals(general)


def _random_tree(rng: random.Random, levels: int) -> nn.Module:
    if levels == 0 or rng.random() < 0.3:
        return nn.Linear(1, rng.randint(1, 5)) if rng.random() < 0.7 else nn.ReLU()
    return nn.Sequential(*(_random_tree(rng, levels - 1) for _ in range(rng.randint(1, 3))))


@pytest.mark.parametrize("seed", range(12))
def test_depths_and_subtree_counts_equal_a_recursive_count(seed):
    """The layers' depths (from the parents' rows by pointer jumping) against a recursion, and
    their subtree counts (summed level by level) against torch's."""
    rng = random.Random(seed)
    model: nn.Module = _random_tree(rng, rng.randint(1, 9))
    for _ in range(seed * 3):  # deep chains too: 0 to 33 levels above the random tree
        model = nn.Sequential(model)
    expected: dict[str, int] = {}

    def visit(module: nn.Module, path: str, depth: int) -> None:
        expected[path] = depth
        for local, child in module.named_children():
            visit(child, f"{path}.{local}" if path else local, depth + 1)

    visit(model, "", 0)
    frame = nbinspect.layers(model)
    assert dict(zip(frame["name"], frame["depth"])) == expected
    assert frame["depth"].dtype == "Int64"
    counts = {path: sum(p.numel() for p in m.parameters()) for path, m in model.named_modules()}
    assert dict(zip(frame["name"], frame["params"])) == counts


@pytest.mark.parametrize("order", ["walk", "reversed"])
def test_own_counts_equal_a_loop_over_the_tensors(order):
    """The modules' own counts (summed per run of a module's tensors, or tensor by tensor when
    the tensors are not grouped by module) against a plain loop."""
    from nbinspect.analyze import structure
    from nbinspect.core.source import ModelSource

    walked = nbinspect.backends.as_source(_nested_untied())
    tensors = walked.tensors if order == "walk" else tuple(reversed(walked.tensors))
    source = ModelSource("m", "torch", modules=walked.modules, tensors=tensors)
    expected = {m.name: [0] * 5 for m in walked.modules}
    for t in walked.tensors:
        row = expected[t.module]
        if t.kind == "parameter":
            row[0] += t.numel
            row[1] += t.numel if t.requires_grad else 0
            row[2] += t.nbytes
        else:
            row[3] += t.nbytes
            row[4] += t.numel
    assert structure._own_counts(source).tolist() == list(expected.values())
