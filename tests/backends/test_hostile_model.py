"""The model is never changed, and unusual modules are counted and named right: legacy
prune/weight_norm/spectral_norm hooks, bf16 fallbacks, dotted and odd names, sparse and
quantized weights, inference mode, threads, views that share memory, and raising hooks."""

from __future__ import annotations

import threading
import warnings

import jsonschema
import pytest
import torch
import torch.nn.utils.prune as prune
from torch import nn

import nbinspect
from nbinspect import TraceError, load_checkpoint

from ..conftest import assert_unchanged, model_state


def _legacy(kind: str) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    if kind == "prune":
        prune.l1_unstructured(model[0], "weight", amount=0.5)
    elif kind == "weight_norm":
        with pytest.warns(FutureWarning):
            model[0] = torch.nn.utils.weight_norm(model[0])
    else:
        model[0] = torch.nn.utils.spectral_norm(model[0])
    return model


@pytest.mark.parametrize("kind", ["prune", "weight_norm", "spectral_norm"])
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_attributes_forward_pre_hooks_recompute_are_put_back(kind, mode):
    model = _legacy(kind).train(mode == "train")
    weight = model[0].weight
    before = model_state(model)
    nbinspect.memory(model, input=(2, 4), batch_size=8)  # fake tensors
    nbinspect.trace(model, (2, 4), backward=True)  # real tensors
    nbinspect.inspect(model, input=torch.ones(3, 4))
    assert model[0].weight is weight  # not a FakeTensor, not a tensor holding the trace's graph
    assert type(model[0].weight) is torch.Tensor
    assert_unchanged(before, model_state(model))  # spectral_norm's u and v and the RNG too


def test_spectral_norm_power_iteration_state_is_kept():
    model = _legacy("spectral_norm").train()
    u, v = model[0].weight_u.clone(), model[0].weight_v.clone()
    reference = _legacy("spectral_norm").train()
    reference(torch.ones(1, 4))  # a real forward in train mode does advance them
    assert not torch.equal(reference[0].weight_u, u)
    nbinspect.trace(model, (2, 4))
    assert torch.equal(model[0].weight_u, u) and torch.equal(model[0].weight_v, v)


class _DataDependent(nn.Module):
    """Branches on a value: fake tensors cannot run it, so memory() falls back to a real run."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(3, 3, 1)

    def forward(self, x):
        return self.conv(x) if x.sum() > -1 else x


def _whole(plan):
    """The whole-model rows of a memory plan, by component."""
    return plan[plan["layer"].isna()].set_index("component")


def test_bf16_real_run_fallback_builds_inputs_in_the_parameters_dtype():
    model = _DataDependent().to(torch.bfloat16)
    before = model_state(model)
    for given in ((2, 3, 4), torch.zeros(2, 3, 4)):  # a float32 tensor as the user would pass
        plan = _whole(nbinspect.memory(model, input=given, precision="bf16"))
        assert plan.loc["parameters", "bytes"] == (9 + 3) * 2
        assert "measured" in plan.loc["activations", "note"]
    assert_unchanged(before, model_state(model))


def _dotted() -> nn.Module:
    model = nn.Module()
    model._modules["enc.layer"] = nn.Linear(2, 3)  # registered by hand
    setattr(model, "dec.out", nn.Linear(3, 1))  # Module.__setattr__ registers it too
    model.enc = nn.Sequential(nn.Linear(3, 3))
    return model


def _validate(insp) -> None:
    schema = nbinspect.json_schema()
    jsonschema.Draft202012Validator(schema).validate(insp.to_dict())


def test_module_names_with_dots_are_kept():
    model = _dotted()
    insp = nbinspect.inspect(model)
    layers = insp.layers.set_index("name")
    assert list(insp.layers["name"]) == ["", "enc.layer", "dec.out", "enc", "enc.0"]
    assert layers.loc["enc.layer", "parent"] == "" and layers.loc["enc.layer", "depth"] == 1
    assert layers.loc["enc.0", "parent"] == "enc" and layers.loc["enc.0", "depth"] == 2
    assert layers.loc["", "params"] == 9 + 4 + 12
    assert insp.params.set_index("name").loc["enc.layer.weight", "module"] == "enc.layer"
    by_module = nbinspect.stats(model, by="module").set_index("name")
    assert by_module.loc["enc.layer", "numel"] == 9 and by_module.loc["enc", "numel"] == 12
    _validate(insp)
    assert "enc.layer" in insp.summary()


def test_comparing_models_with_dotted_child_names():
    """The comparison's tree is the union of both trees: a child registered as "dec.out"
    hangs from the root in both, and a module only b has ("extra.head") gets a row too."""
    a, b = _dotted(), _dotted()
    setattr(b, "extra.head", nn.Linear(1, 1))
    cmp = nbinspect.compare(a, b)
    tree = cmp.frames["layers"]
    layers = tree.set_index("name")
    assert list(tree["name"]) == ["", "enc.layer", "dec.out", "enc", "enc.0", "extra.head"]
    assert layers.loc["dec.out", "parent"] == "" and layers.loc["extra.head", "parent"] == ""
    assert layers.loc["extra.head", "depth"] == 1 and layers.loc["enc.0", "depth"] == 2
    added = cmp.frame.set_index("name").loc["extra.head.weight", "status"]
    assert added == "added"


def test_odd_tensor_names_in_files_are_kept(tmp_path):
    names = ["", "a..b", ".lead", "trail.", "ok.w"]
    state = {n: torch.full((i + 1,), float(i)) for i, n in enumerate(names)}
    torch.save(state, tmp_path / "odd.pt")
    insp = nbinspect.inspect(tmp_path / "odd.pt")
    assert list(insp.params["name"]) == names
    assert insp.totals["total_params"] == 1 + 2 + 3 + 4 + 5
    stats = insp.stats.set_index("name")
    assert [stats.loc[n, "mean"] for n in names] == [0.0, 1.0, 2.0, 3.0, 4.0]
    rollup = nbinspect.stats(tmp_path / "odd.pt", by="module").set_index("name")
    assert rollup.loc["", "numel"] == 15
    _validate(insp)
    insp.to_html(tmp_path / "odd.html")


def test_sparse_tensors_in_a_file_get_rows_with_a_note(tmp_path):
    dense = torch.zeros(4, 5)
    dense[1, 2], dense[3, 0] = 2.0, -1.0
    torch.save({"sp": dense.to_sparse(), "w": torch.ones(3)}, tmp_path / "sparse.pt")
    insp = nbinspect.inspect(tmp_path / "sparse.pt")
    params = insp.params.set_index("name")
    assert params.loc["sp", "numel"] == 20 and params.loc["sp", "shape"] == (4, 5)
    row = insp.stats.set_index("name").loc["sp"]
    assert row["mean"] == pytest.approx(1.0 / 20) and row["note"]  # stored values plus implicit zeros


def test_dynamically_quantized_linear_counts_its_packed_weights():
    with warnings.catch_warnings():  # torch.ao.quantization is deprecated, and says so
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        model = quantize_dynamic(nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2)), {nn.Linear})
    totals = nbinspect.totals(model)
    assert totals["total_params"] == 4 * 3 + 3 + 3 * 2 + 2
    assert totals["trainable_params"] == 0  # packed weights are not trained
    weight, bias = model[0]._packed_params._weight_bias()
    assert totals["param_bytes"] == 12 * 1 + 3 * 4 + 6 * 1 + 2 * 4  # int8 weights, float32 biases
    assert weight.dtype == torch.qint8 and bias.dtype == torch.float32
    layers = nbinspect.layers(model).set_index("name")
    assert layers.loc["0._packed_params", "attrs"]["quantization"] == "qint8 per_tensor_affine (packed)"
    assert layers.loc["0", "params"] == 15
    stats = nbinspect.stats(model).set_index("name")
    assert stats.loc["0._packed_params.weight", "numel"] == 12


def test_inside_inference_mode_what_can_be_measured_is():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)).train()
    before = model_state(model)
    with torch.inference_mode():
        x = torch.ones(3, 4)
        reference = model.eval()(x)  # the user's own forward works here
        model.train()
        trace = nbinspect.trace(model, x)
        assert nbinspect.trace(model, (3, 4)).totals["activation_bytes"] == trace.totals["activation_bytes"]
        insp = nbinspect.inspect(model, input=x)
        plan = _whole(nbinspect.memory(model, input=x, batch_size=6))
    assert reference.shape == (3, 2)
    assert trace.totals["activation_bytes"] > 0 and trace.totals["flops"] == 2 * 3 * (16 + 8)
    assert insp.totals["flops"] == trace.totals["flops"] and plan.loc["activations", "bytes"] > 0
    assert_unchanged(before, model_state(model))


def test_model_made_in_inference_mode_says_what_it_could_not_measure():
    with torch.inference_mode():
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    result = nbinspect.trace(model, (2, 4))
    assert result.totals["flops"] == 2 * 2 * 16
    assert result.totals["activation_bytes"] is None
    assert "not measured: the model's tensors are inference tensors" in result.totals["flops_note"]
    with pytest.raises(ValueError, match="backward=True needs autograd"):
        nbinspect.trace(model, (2, 4), backward=True)


def test_threads_tracing_one_model_do_not_mix_their_calls():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8)).train()
    before = model_state(model)
    alone = nbinspect.trace(model, (4, 8))
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                results.append(nbinspect.trace(model, (4, 8)))
        except Exception as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and len(results) == 15
    for r in results:
        assert list(r.flow["name"]) == list(alone.flow["name"])  # one call per module, no more
        assert r.totals == alone.totals
    assert_unchanged(before, model_state(model))  # running stats and num_batches_tracked too


def test_another_threads_forward_during_a_trace_is_not_recorded():
    gate, done = threading.Event(), threading.Event()
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())

    def user():  # the user's own thread, calling the model while the trace runs
        gate.wait(30)
        model(torch.ones(1, 4))
        done.set()

    class Waits(nn.Module):
        def forward(self, x):
            gate.set()
            done.wait(30)  # the other thread's forward happens inside this trace
            return x

    model.append(Waits())
    worker = threading.Thread(target=user)
    worker.start()
    result = nbinspect.trace(model, (2, 4))
    worker.join(timeout=60)
    assert done.is_set()
    assert list(result.flow["name"]) == ["", "0", "1", "2"]
    assert list(result.layers["calls"]) == [1, 1, 1, 1]


def test_views_are_tied_by_the_exact_elements_they_cover():
    base = torch.arange(12.0)
    model = nn.Module()
    model.register_parameter("a", nn.Parameter(base[:4]))  # elements 0..3
    model.register_buffer("b", base[:8:2])  # same start, same size: elements 0, 2, 4, 6
    model.register_buffer("c", base[:4].view(2, 2).t())  # elements 0..3 again, transposed
    model.register_buffer("d", base[:4].expand(3, 4))  # elements 0..3, broadcast
    tied = nbinspect.params(model).set_index("name")["tied_to"]
    assert tied.isna()["a"] and tied.isna()["b"]
    assert tied["c"] == "a" and tied["d"] == "a"


def test_a_raising_hook_is_named_by_its_module():
    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(2, 2)
            self.after = nn.ReLU()

        def forward(self, x):
            return self.after(self.inner(x))

    def boom(*_):
        raise RuntimeError("hook boom")

    for register, where in (
        (lambda m: m.inner.register_forward_hook(boom), "forward failed in inner (Linear), in a forward hook,"),
        (lambda m: m.inner.register_forward_pre_hook(boom), "forward failed in inner (Linear) with inputs"),
        (lambda m: m.register_forward_hook(boom), "forward failed in Holder (the root module), in a forward hook,"),
    ):
        model = Holder()
        register(model)
        with pytest.raises(TraceError) as exc:
            nbinspect.trace(model, (1, 2))
        assert str(exc.value).startswith(where), str(exc.value)
        assert str(exc.value).endswith("RuntimeError: hook boom")


def test_failing_fake_forward_keeps_stderr_clean(capfd):
    class Bad(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 2)

        def forward(self, x):
            return self.l(x) @ torch.zeros(5, 5)

    with pytest.raises(TraceError, match="a and b must have same reduction dim"):
        nbinspect.memory(Bad(), input=(1, 2))
    with pytest.raises(TraceError):
        nbinspect.trace(Bad().to("meta"), (1, 2))
    assert capfd.readouterr().err == ""


def test_checkpoint_sources_are_not_changed_by_a_trace_of_their_loaded_model(tmp_path):
    model = _legacy("weight_norm")
    torch.save(model.state_dict(), tmp_path / "wn.pt")
    source = load_checkpoint(tmp_path / "wn.pt")
    assert {t.name for t in source.tensors} == set(model.state_dict())


@pytest.mark.parametrize("call", ["trace", "inspect", "memory"])
def test_a_lazy_model_not_run_yet_is_one_line_naming_its_lazy_modules_and_stays_lazy(call):
    """Its first forward would make the parameters: the trace refuses, in one line, instead
    of initializing them (or failing with torch's paragraph)."""
    model = nn.Sequential(nn.LazyLinear(4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4), nn.LazyConv1d(2, 1)))
    x = torch.randn(2, 3)
    run = {
        "trace": lambda: nbinspect.trace(model, x),
        "inspect": lambda: nbinspect.inspect(model, input=x),
        "memory": lambda: nbinspect.memory(model, input=x, batch_size=4, optimizer="adamw"),
    }[call]
    with pytest.raises(ValueError) as caught:
        run()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("LazyLinear '0', LazyConv1d '2.1': lazy, not initialized yet")
    assert isinstance(model[0].weight, nn.parameter.UninitializedParameter)
    assert isinstance(model[2][1].bias, nn.parameter.UninitializedParameter)
    assert nbinspect.inspect(model).totals["total_params"] == 4 * 4 + 4  # without an input: listed, not traced
