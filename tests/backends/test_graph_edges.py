"""The dataflow the torch trace records (``insp.graph``) against hand-written dataflow of small
models and against ``torch.fx.symbolic_trace``'s graph of the same models (an independent
tracer: Python-level symbolic execution, no hooks and no torch function mode)."""

from __future__ import annotations

import operator
from collections import Counter

import pytest
import torch
import torch.nn.functional as F
from torch import fx, nn

import nbinspect
from nbinspect import examples
from nbinspect.backends.torch.dataflow import SHAPE_OPS


def finest(insp) -> Counter:
    """(producer, consumer) of every edge at the finest level, as labels: a call by its module
    path, an op by its function name, inputs and outputs by their path."""
    nodes = insp.frames["graph_nodes"]
    label = {}
    for node, kind, name in zip(nodes["node"], nodes["kind"], nodes["name"]):
        label[int(node)] = f"{kind}:{name}" if kind in ("input", "output") else name or "<root>"
    g = insp.graph
    return Counter(zip((label[int(s)] for s in g["producer"]), (label[int(d)] for d in g["consumer"])))


def traced(model: nn.Module, *args, **kwargs):
    return nbinspect.trace(model, *args, **kwargs)


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return x + self.fc(self.norm(x))


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(8, 8) for _ in range(4))

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        a = torch.softmax(q @ k.transpose(-1, -2) / 8**0.5, -1)
        return self.o(a @ v)


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return self.fc(torch.relu(self.fc(x)))


class TiedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.head = nn.Linear(8, 10, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.emb(ids)))


class KeywordInputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x, *, mask):
        return {"y": self.a(x) * mask, "z": self.b(mask)}


class InPlaceAndIdentity(nn.Module):
    def __init__(self):
        super().__init__()
        self.skip = nn.Identity()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(self.skip(x))
        h += 1
        return h.view(2, 2, 4).relu()


HAND = {
    "residual": (
        Residual,
        (2, 8),
        [("input:0", "norm"), ("norm", "fc"), ("fc", "add"), ("input:0", "add"), ("add", "output:output")],
    ),
    "attention": (
        Attention,
        (2, 4, 8),
        [
            ("input:0", "q"),
            ("input:0", "k"),
            ("input:0", "v"),
            ("q", "matmul"),
            ("k", "matmul"),
            ("matmul", "div"),
            ("div", "softmax"),
            ("softmax", "matmul"),
            ("v", "matmul"),
            ("matmul", "o"),
            ("o", "output:output"),
        ],
    ),
    # one module called twice: two call nodes of the same path, both in the chain
    "twice": (Twice, (2, 8), [("input:0", "fc"), ("fc", "relu"), ("relu", "fc"), ("fc", "output:output")]),
    # the tied head reads the embedding's weight: no dataflow edge from emb's weight, only activations
    "tied": (TiedHead, None, [("input:0", "emb"), ("emb", "tanh"), ("tanh", "head"), ("head", "output:output")]),
}


@pytest.mark.parametrize("case", sorted(HAND))
def test_edges_match_hand_written_dataflow(case):
    make, shape, want = HAND[case]
    torch.manual_seed(0)
    x = torch.tensor([[1, 2, 3]]) if shape is None else torch.randn(*shape)
    assert finest(traced(make(), x)) == Counter(want)


def test_module_called_twice_has_two_call_nodes_in_order():
    insp = traced(Twice(), torch.randn(2, 8))
    nodes = insp.frames["graph_nodes"]
    fc = nodes[nodes["name"] == "fc"]
    assert fc["call"].tolist() == [1, 2]  # flow rows of the two calls
    edges = insp.graph
    first, second = fc["node"].tolist()
    relu = int(nodes[nodes["name"] == "relu"]["node"].iloc[0])
    pairs = set(zip(edges["producer"].tolist(), edges["consumer"].tolist()))
    assert {(first, relu), (relu, second)} <= pairs


@pytest.mark.parametrize("how", ["trace", "inspect"])
def test_keyword_inputs_and_dict_outputs_are_named_by_path(how):
    x, mask = torch.randn(2, 4), torch.ones(2, 4)
    if how == "trace":
        insp = nbinspect.trace(KeywordInputs(), x=x, mask=mask)
    else:
        insp = nbinspect.inspect(KeywordInputs(), input={"x": x, "mask": mask}, stats=False)
    assert finest(insp) == Counter(
        [
            ("input:x", "a"),
            ("a", "mul"),
            ("input:mask", "mul"),
            ("input:mask", "b"),
            ("mul", "output:output.y"),
            ("b", "output:output.z"),
        ]
    )
    g = insp.graph
    assert set(g["shape"]) == {(2, 4)}
    assert set(g["dtype"]) == {"float32"}
    assert set(g["bytes"]) == {2 * 4 * 4}


def test_in_place_ops_pass_through_modules_and_shape_ops_are_contracted():
    insp = traced(InPlaceAndIdentity(), torch.randn(4, 4))
    assert finest(insp) == Counter(
        [("input:0", "skip"), ("skip", "fc"), ("fc", "add_"), ("add_", "relu"), ("relu", "output:output")]
    )
    g = insp.graph.set_index(["producer_name", "consumer_name"])
    into_relu = insp.graph[insp.graph["consumer_name"] == ""]  # relu runs in the root call
    assert "view" in set(into_relu["via"].dropna())
    assert bool(insp.graph.loc[insp.graph["via"].isna() & insp.graph["inplace"]].shape[0] == 1)
    assert len(g) == 5


def test_graph_frames_follow_the_schema_and_calls_point_into_flow():
    from nbinspect.schema import GRAPH, GRAPH_NODES

    insp = traced(examples.build("tiny_lm"), examples.example_input("tiny_lm"))
    GRAPH.validate(insp.frames["graph"])
    GRAPH_NODES.validate(insp.frames["graph_nodes"])
    nodes, flow = insp.frames["graph_nodes"], insp.flow
    calls = nodes[nodes["kind"] == "call"]
    assert calls["name"].tolist() == flow["name"].tolist()  # one call node per flow row, in order
    assert calls["call"].tolist() == flow["index"].tolist()
    # a call's nodes lie between its id and its `last`
    for node, parent in zip(nodes["node"], nodes["parent"]):
        if parent is not None and parent is not pd_na():
            assert int(parent) < int(node) <= int(nodes["last"].iloc[int(parent)])


def pd_na():
    import pandas as pd

    return pd.NA


# ---- against torch.fx: an independent tracer of the same models

_FX_NAMES = {operator.add: "add", operator.mul: "mul", operator.truediv: "div", operator.matmul: "matmul"}


def fx_edges(model: nn.Module) -> Counter:
    """torch.fx's graph with its shape-only nodes contracted as nbinspect contracts them,
    labelled like :func:`finest` (a call_module by its path, an op by its name)."""
    gm = fx.symbolic_trace(model)
    label: dict[fx.Node, str] = {}
    source: dict[fx.Node, list[fx.Node]] = {}  # node -> the drawn nodes feeding it
    edges: Counter = Counter()
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            label[n] = "input:0"
        elif n.op == "get_attr":
            continue
        elif n.op == "output":
            label[n] = "output:output"
        elif n.op == "call_module":
            label[n] = n.target
        else:
            target = n.target
            name = (
                target if isinstance(target, str) else _FX_NAMES.get(target, getattr(target, "__name__", str(target)))
            )
            label[n] = name
        inputs = [a for a in n.all_input_nodes if a in label]
        if n.op in ("call_method", "call_function") and label[n] in SHAPE_OPS | {"getitem"}:
            source[n] = [s for a in inputs[:1] for s in source.get(a, [a])]
            continue
        for a in inputs:
            for s in source.get(a, [a]):
                edges[(label[s], label[n])] += 1
    return edges


@pytest.mark.parametrize(
    "make",
    [Residual, Attention, Twice, InPlaceAndIdentity, lambda: examples.build("mlp"), lambda: examples.build("cnn")],
    ids=["residual", "attention", "twice", "inplace", "mlp", "cnn"],
)
def test_edges_match_torch_fx(make):
    torch.manual_seed(0)
    model = make().eval()
    shape = {"SmallCNN": (2, 3, 32, 32), "MLP": (2, 32), "Attention": (2, 4, 8), "InPlaceAndIdentity": (4, 4)}
    inp = torch.randn(*shape.get(type(model).__name__, (2, 8)))
    # fx records `h += 1` as operator.add (a proxy has no in-place dunders): compare op names without the "_"
    ours = Counter({(a.removesuffix("_"), b.removesuffix("_")): n for (a, b), n in finest(traced(model, inp)).items()})
    assert ours == fx_edges(model)


def test_fx_reference_sees_edges_nbinspect_would_miss():
    """The reference is not a copy of the capture: on a model whose dataflow fx records
    through a functional op, dropping the op node changes the edge set."""
    model = Residual()
    ours = finest(traced(model, torch.randn(2, 8)))
    ours[("fc", "add")] -= 1
    assert +ours != fx_edges(model)


def test_no_tensor_is_kept_alive_and_no_mode_is_left_behind():
    import weakref

    from torch.overrides import _get_current_function_mode_stack

    kept = []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            with torch.no_grad():  # autograd would keep relu's output for backward: only the capture could
                h = F.relu(self.fc(x))
                kept.append(weakref.ref(h))
                return h.sum()

    insp = traced(Probe(), torch.randn(3, 4))
    assert kept and kept[0]() is None  # the intermediate died with the forward pass
    assert not _get_current_function_mode_stack()
    assert len(insp.graph) == 4  # input->fc, fc->relu, relu->sum, sum->output


def test_failed_trace_leaves_no_mode_and_a_reason():
    from torch.overrides import _get_current_function_mode_stack

    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("")

    with pytest.raises(nbinspect.TraceError) as err:
        traced(Boom(), torch.randn(2))
    assert not _get_current_function_mode_stack()
    assert str(err.value).split(":", 1)[1].strip()  # never an empty reason
    assert "RuntimeError (no message)" in str(err.value)


def test_graph_mode_is_on_only_in_the_own_code_of_modules_with_children():
    """Ops run by a leaf are never nodes, so the recorder keeps the mode off while a leaf
    (and the recorder itself) runs; under a mode the model pushed, the graph's stays where it
    is, and the edges are as without one."""
    from torch.overrides import _get_current_function_mode_stack

    def modes() -> list[str]:
        return [type(m).__name__ for m in _get_current_function_mode_stack()]

    seen: list[tuple[str, list[str]]] = []

    class Leaf(nn.Module):
        def forward(self, x):
            seen.append(("leaf", modes()))
            return x * 2

    class Parent(nn.Module):
        def __init__(self):
            super().__init__()
            self.leaf = Leaf()

        def forward(self, x):
            seen.append(("parent", modes()))
            h = self.leaf(x)
            seen.append(("parent", modes()))
            with torch.device("cpu"):  # a mode of the model's own, above the graph's
                h = self.leaf(h) + 1
            return h

    insp = traced(Parent(), torch.randn(2, 4))
    assert seen == [
        ("parent", ["GraphMode"]),
        ("leaf", []),
        ("parent", ["GraphMode"]),
        ("leaf", ["GraphMode", "DeviceContext"]),
    ]
    assert not _get_current_function_mode_stack()
    assert finest(insp) == Counter([("input:0", "leaf"), ("leaf", "leaf"), ("leaf", "add"), ("add", "output:output")])


def test_colour_options_come_from_the_frames_and_a_users_series():
    import pandas as pd

    model = examples.build("tiny_lm")
    with torch.no_grad():
        model.blocks[0].mlp[0].weight[0, 0] = float("nan")
    insp = nbinspect.inspect(model, input=examples.example_input("tiny_lm"))
    graph = insp._payload({"mine": pd.Series({"ln_f": 3.0, "lm_head": -1.5})})["graph"]
    options = {c["key"]: c for c in graph["colour"]}
    names = graph["nodes"]["name"]
    at = {n: i for i, n in reversed(list(enumerate(names)))}  # first node of each name
    flops = dict(zip(insp.flow["name"], insp.flow["flops"]))
    assert options["flops"]["values"][at["lm_head"]] == flops["lm_head"]
    assert options["flops"]["scale"] == "log"
    assert options["problems"]["values"][at["blocks.0.mlp.0"]] == 1  # its weight holds a NaN
    assert options["problems"]["values"][at["ln_f"]] == 0
    assert options["problems"]["scale"] == "linear"
    mine = options["mine"]
    assert (mine["values"][at["ln_f"]], mine["values"][at["lm_head"]], mine["scale"]) == (3.0, -1.5, "diverging")
    assert sum(v is not None for v in mine["values"]) == 2
    ops = [i for i, k in enumerate(graph["nodes"]["kind"]) if k != "call"]
    assert all(options["flops"]["values"][i] is None for i in ops)


class FunctionalTiedHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 8)
        self.norm = nn.LayerNorm(8)

    def forward(self, ids):
        return self.norm(self.emb(ids)) @ self.emb.weight.T  # the head is the embedding, used as a function


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_an_op_reading_a_parameter_names_it(device):
    with torch.device(device):
        model = FunctionalTiedHead()
    insp = traced(model, torch.tensor([[1, 2, 3]]))
    assert finest(insp) == Counter(
        [("input:0", "emb"), ("emb", "norm"), ("norm", "matmul"), ("matmul", "output:output")]
    )
    nodes = insp.frames["graph_nodes"]
    matmul = nodes[nodes["name"] == "matmul"]
    assert matmul["params"].tolist() == [("emb.weight",)]
    assert nodes[nodes["kind"] == "call"]["params"].isna().all()


def _reference_change(a: nn.Module, b: nn.Module, prefix: str) -> float:
    """‖Δ‖ / max(‖a‖, ‖b‖) over a module's tensors as one vector, in float64."""
    pa = {k: v.detach().double() for k, v in a.state_dict().items() if k.startswith(prefix + ".")}
    pb = {k: v.detach().double() for k, v in b.state_dict().items() if k.startswith(prefix + ".")}
    delta = sum(float(((pb[k] - pa[k]) ** 2).sum()) for k in pa) ** 0.5
    norm_a = sum(float((t**2).sum()) for t in pa.values()) ** 0.5
    norm_b = sum(float((t**2).sum()) for t in pb.values()) ** 0.5
    return delta / max(norm_a, norm_b)


def test_colour_by_a_comparison_and_a_training_run():
    """The graph colours modules by a comparison's per-module change and by a training run's
    change over its last interval, each equal to a float64 reference."""
    from nbinspect.track import AnalysisConfig, ModelAnalysisManager

    x = examples.example_input("tiny_lm")
    before = examples.build("tiny_lm")
    after = examples.build("tiny_lm")
    with torch.no_grad():
        for p in after.parameters():
            p.add_(0.01 * torch.randn_like(p))
    insp = nbinspect.inspect(after, input=x)
    manager = ModelAnalysisManager.create(AnalysisConfig(interval=1))
    trained = examples.build("tiny_lm")
    start = {k: v.detach().clone() for k, v in trained.state_dict().items()}
    manager.on_optimizer_step(trained)
    with torch.no_grad():
        trained.ln_f.weight.mul_(1.5)
    manager.on_optimizer_step(trained)
    start_model = examples.build("tiny_lm")
    start_model.load_state_dict(start)

    graph = insp._payload({"compared": nbinspect.compare(before, after), "trained": manager})["graph"]
    options = {c["key"]: c for c in graph["colour"]}
    at = {n: i for i, n in reversed(list(enumerate(graph["nodes"]["name"])))}
    for name in ("lm_head", "ln_f", "blocks.0.mlp.0"):
        got = options["compared"]["values"][at[name]]
        assert abs(got - _reference_change(before, after, name)) < 1e-6 * got, name  # Δ rounds in float32
    assert abs(options["trained"]["values"][at["ln_f"]] - _reference_change(start_model, trained, "ln_f")) < 1e-6
    assert options["trained"]["values"][at["blocks.0.mlp.0"]] == 0  # untouched in the last interval
    with pytest.raises(TypeError, match="colour_by"):
        insp._payload({"bad": 3})
