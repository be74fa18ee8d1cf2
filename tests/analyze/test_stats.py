"""The stats frame: every dtype, models, module roll-ups, inputs, errors, no side effects."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples, schema
from nbinspect.analyze.reduce import SAMPLE
from tests.analyze.test_stats_merge import reference
from tests.conftest import assert_unchanged, model_state


def check_row(row: pd.Series, values: np.ndarray, rel: float = 1e-7) -> None:
    """One stats row against plain float64 numpy on the same values."""
    ref = reference(values)
    assert row["numel"] == ref["numel"]
    assert (row["nan"], row["inf"]) == (ref["nan"], ref["inf"])
    assert row["min"] == ref["min"] and row["max"] == ref["max"]
    assert abs(row["mean"] - ref["mean"]) <= rel * ref["abs_mean"] + 1e-300
    for key in ("std", "abs_mean", "l2"):
        assert row[key] == pytest.approx(ref[key], rel=rel, abs=1e-300), key
    assert row["zeros"] == ref["zeros"] / ref["numel"]
    finite = values[np.isfinite(values)].astype(np.float64)
    counts, edges = np.histogram(finite, len(row["hist_counts"]))
    assert np.array_equal(row["hist_edges"], edges)
    if row["kind"] == "module":  # re-binned from its tensors' histograms: close, not exact
        assert np.abs(row["hist_counts"] - counts).max() <= 0.02 * ref["count"] + 2
    elif row["hist_sample"] == ref["count"]:
        assert np.array_equal(row["hist_counts"], counts)
    assert row["hist_counts"].sum() == ref["count"]


def one(t: torch.Tensor, **kw) -> pd.Series:
    frame = nbinspect.stats(t, **kw)
    schema.STATS.validate(frame)
    assert len(frame) == 1
    return frame.iloc[0]


def test_frame_follows_schema_and_widget_contract(zoo_name):
    frame = nbinspect.stats(examples.build(zoo_name), bins=32)
    schema.STATS.validate(frame)
    for counts, edges in zip(frame["hist_counts"], frame["hist_edges"]):
        assert counts.dtype == np.int64 and len(counts) == 32
        assert edges.dtype == np.float64 and len(edges) == 33


def test_analyzer_leaves_model_unchanged(zoo_name):
    model = examples.build(zoo_name)
    before = model_state(model)
    nbinspect.stats(model)
    nbinspect.stats(model, by="module")
    assert_unchanged(before, model_state(model))


def test_every_tensor_of_a_model_matches_numpy():
    model = examples.build("cnn")
    frame = nbinspect.stats(model).set_index("name")
    for name, t in model.state_dict().items():
        check_row(frame.loc[name], t.double().numpy().ravel(), rel=1e-12)
    assert frame.loc["features.1.num_batches_tracked", "dtype"] == "int64"


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.float8_e4m3fn, torch.float8_e5m2]
)
@pytest.mark.parametrize("n", [1000, 3 * SAMPLE + 5])
def test_floating_dtypes(dtype, n):
    g = torch.Generator().manual_seed(n)
    t = (torch.randn(n, generator=g) * 0.5).to(dtype)
    row = one(t)
    assert row["dtype"] == str(dtype).removeprefix("torch.") and pd.isna(row["note"])
    check_row(row, t.to(torch.float64).numpy())


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool])
@pytest.mark.parametrize("n", [100, 2 * SAMPLE + 1])
def test_integer_and_bool_tensors(dtype, n):
    g = torch.Generator().manual_seed(7)
    t = torch.randint(0, 2 if dtype == torch.bool else 100, (n,), generator=g).to(dtype)
    row = one(t)
    check_row(row, t.to(torch.float64).numpy(), rel=1e-12)
    if dtype == torch.bool:
        assert row["mean"] == pytest.approx(t.double().mean().item())  # fraction of True


def test_complex_tensors_use_magnitude():
    g = torch.Generator().manual_seed(8)
    t = torch.randn(500, dtype=torch.complex64, generator=g)
    row = one(t)
    assert "magnitude" in row["note"]
    check_row(row, t.abs().double().numpy(), rel=1e-7)


def test_meta_tensors_and_meta_models_say_no_values():
    row = one(torch.empty(10, 10, device="meta"))
    assert row["note"] == "no values: meta tensor" and row["numel"] == 100
    assert pd.isna(row["mean"]) and row["hist_counts"] is None and pd.isna(row["nan"])
    with torch.device("meta"):
        model = examples.TinyLM()
    frame = nbinspect.stats(model, by="module")
    assert set(frame["note"]) == {"no values: meta tensor", "no parameters"} and frame["mean"].isna().all()


def test_uninitialized_lazy_parameters_say_so():
    frame = nbinspect.stats(nn.LazyLinear(4))
    assert frame["note"].str.contains("uninitialized").all()


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_sparse_tensors_include_implicit_zeros(layout):
    g = torch.Generator().manual_seed(9)
    dense = torch.randn(40, 30, generator=g) * (torch.rand(40, 30, generator=g) < 0.2)
    sparse = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    row = one(sparse)
    assert "implicit zeros" in row["note"]
    ref = reference(dense.double().numpy())
    assert row["zeros"] == ref["zeros"] / ref["numel"] and row["numel"] == 1200
    assert row["std"] == pytest.approx(ref["std"], rel=1e-9) and row["min"] == ref["min"]
    assert row["hist_counts"].sum() == 1200


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_quantized_tensors_are_dequantized():
    q = torch.quantize_per_tensor(torch.linspace(-1, 1, 101), 0.02, 0, torch.qint8)
    row = one(q)
    assert row["note"] == "dequantized"
    check_row(row, q.dequantize().double().numpy(), rel=1e-7)


def test_a_failing_tensor_is_skipped_with_its_reason():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("b", torch.zeros(3, dtype=torch.uint16))
            self.w = nn.Parameter(torch.ones(3))

    frame = nbinspect.stats(Broken()).set_index("name")
    assert frame.loc["w", "mean"] == 1.0
    note = frame.loc["b", "note"]
    assert pd.isna(note) or note.startswith("skipped: ")  # uint16 works or says why, never raises


def test_non_contiguous_tensors_match_their_contiguous_copy():
    g = torch.Generator().manual_seed(10)
    base = torch.randn(1500, 1100, generator=g)
    for view in (base.t(), base[::2, 3:], base.unsqueeze(0).expand(2, -1, -1)):
        row = one(view)
        check_row(row, view.contiguous().double().numpy().ravel())


def test_module_rollup_counts_tied_weights_once():
    model = examples.build("tiny_lm")
    frame = nbinspect.stats(model, by="module").set_index("name")
    assert frame.loc["", "numel"] == nbinspect.totals(model)["total_params"]
    unique = {id(p): p for p in model.parameters()}.values()
    check_row(frame.loc[""], torch.cat([p.detach().reshape(-1) for p in unique]).double().numpy(), rel=1e-12)
    assert frame.loc["lm_head", "numel"] == 256 * 64 and frame.loc["blocks.0.ln_1", "kind"] == "module"
    assert list(frame.index) == list(nbinspect.layers(model)["name"])


def test_module_rollup_leaves_out_buffers_and_reports_empty_modules():
    frame = nbinspect.stats(examples.build("cnn"), by="module").set_index("name")
    bn = examples.build("cnn").features[1]
    check_row(frame.loc["features.1"], torch.cat([bn.weight.detach(), bn.bias.detach()]).double().numpy(), rel=1e-12)
    assert frame.loc["features.2", "note"] == "no parameters" and pd.isna(frame.loc["features.2", "mean"])


def test_large_module_rollup_is_close_to_the_exact_histogram():
    model = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 1024))
    row = nbinspect.stats(model, by="module").iloc[0]
    values = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).double().numpy()
    check_row(row, values)
    exact = np.histogram(values, 64)[0]
    assert np.abs(row["hist_counts"] - exact).max() < 0.01 * values.size


def test_dict_and_single_tensor_inputs():
    g = torch.Generator().manual_seed(11)
    weights = {
        "enc.0.weight": torch.randn(8, 8, generator=g),
        "enc.0.bias": torch.zeros(8),
        "head.weight": torch.ones(2, 8),
    }
    frame = nbinspect.stats(weights).set_index("name")
    assert list(frame.index) == list(weights)
    check_row(frame.loc["enc.0.weight"], weights["enc.0.weight"].double().numpy().ravel(), rel=1e-12)
    assert frame.loc["enc.0.bias", "zeros"] == 1.0
    modules = nbinspect.stats(weights, by="module").set_index("name")
    assert modules.loc["enc", "numel"] == 72 and modules.loc["", "numel"] == 88
    assert one(torch.arange(10.0))["name"] == "tensor"


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="by='layer'"):
        nbinspect.stats(torch.ones(3), by="layer")
    with pytest.raises(ValueError, match="bins=0"):
        nbinspect.stats(torch.ones(3), bins=0)
    with pytest.raises(TypeError, match="got int"):
        nbinspect.stats(3)


def test_progress_bar_only_when_asked_or_slow(capsys):
    model = examples.build("mlp")
    nbinspect.stats(model)  # default: a 2 s delay, so a quick run prints nothing
    nbinspect.stats(model, progress=False)
    assert capsys.readouterr().err == ""
    nbinspect.stats(model, progress=True)
    assert "weight stats" in capsys.readouterr().err


def test_empty_and_all_nan_rows():
    row = one(torch.empty(0))
    assert row["numel"] == 0 and pd.isna(row["mean"]) and pd.isna(row["zeros"]) and row["hist_counts"].sum() == 0
    row = one(torch.full((5,), float("nan")))
    assert row["nan"] == 5 and pd.isna(row["std"]) and row["l2"] == 0.0


@pytest.mark.parametrize("offset", [0.0, 1.0])
def test_accuracy_on_a_large_tensor(offset):
    """Tens of millions of fp32 elements, centred and LayerNorm-like, against a float64
    reference accumulated exactly."""
    g = torch.Generator().manual_seed(12)
    x = offset + torch.randn(1 << 25, generator=g) * 0.02
    row = one(x)
    d = x.double()
    n = d.numel()
    mean = math.fsum(d.view(-1, 1 << 20).sum(1).tolist()) / n
    var = math.fsum(((d - mean) ** 2).view(-1, 1 << 20).sum(1).tolist()) / n
    l2 = math.sqrt(math.fsum((d * d).view(-1, 1 << 20).sum(1).tolist()))
    abs_mean = math.fsum(d.abs().view(-1, 1 << 20).sum(1).tolist()) / n
    assert abs(row["mean"] - mean) <= 1e-6 * abs_mean
    assert row["std"] == pytest.approx(math.sqrt(var), rel=1e-6)
    assert row["l2"] == pytest.approx(l2, rel=1e-6)
    assert row["abs_mean"] == pytest.approx(abs_mean, rel=1e-6)


def test_inspect_holds_the_stats_frames_unless_turned_off():
    model = examples.build("tiny_lm")
    insp = nbinspect.inspect(model, bins=16)
    schema.STATS.validate(insp.stats)
    schema.STATS.validate(insp.stats_by_module)
    assert len(insp.stats["hist_counts"][0]) == 16 and set(insp.stats_by_module["kind"]) == {"module"}
    assert list(insp.stats["name"]) == list(insp.params["name"])
    plain = nbinspect.inspect(model, stats=False)
    assert "stats" not in plain.frames
    with pytest.raises(ValueError, match="without weight statistics"):
        plain.stats


def test_inspect_a_meta_model_says_no_values():
    with torch.device("meta"):
        model = examples.MLP()
    insp = nbinspect.inspect(model)
    assert (insp.stats["note"] == "no values: meta tensor").all()


def test_a_checkpoint_file_streams_to_the_same_numbers(tmp_path):
    model = examples.build("cnn")
    path = tmp_path / "cnn.pt"
    torch.save(model.state_dict(), path)
    from_file = nbinspect.stats(str(path)).set_index("name")
    live = nbinspect.stats(model).set_index("name")
    assert list(from_file.index) == list(live.index)
    for column in ("numel", "mean", "std", "min", "max", "l2", "zeros", "nan", "hist_sample"):
        assert from_file[column].tolist() == live[column].tolist(), column
    assert all(np.array_equal(a, b) for a, b in zip(from_file["hist_counts"], live["hist_counts"]))


def test_torch_thread_count_is_left_alone():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = []
        tensor = torch.randn(3 * SAMPLE)
        original = torch.aminmax

        def spy(*args, **kwargs):  # runs inside the stats loop
            seen.append(torch.get_num_threads())
            return original(*args, **kwargs)

        torch.aminmax = spy
        try:
            nbinspect.stats(tensor)
        finally:
            torch.aminmax = original
        assert seen and set(seen) == {2}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_safetensors_file_is_streamed_a_piece_at_a_time_to_the_float64_numbers(tmp_path, monkeypatch, threads):
    """Large tensors of a safetensors file go through the kernels a piece at a time (never
    loaded whole), split across threads and pieces; every dtype, NaN, ±Inf, zeros and a
    LayerNorm-like offset against float64 numpy, and equal to the same tensors in memory."""
    fused = pytest.importorskip("nbinspect.analyze.fused")
    from safetensors.torch import save_file

    from nbinspect.analyze import reduce
    from nbinspect.io.safetensors_file import FileTensor

    if fused.kernels(fused.FUSED_ABOVE) is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    monkeypatch.setattr(fused, "STREAM_BYTES", 1 << 16)  # many pieces
    monkeypatch.setattr(fused, "PART", 1 << 16)  # and shares for two threads
    monkeypatch.setattr(torch, "get_num_threads", lambda: threads)
    g = torch.Generator().manual_seed(5)
    tensors = {}
    for i, dtype in enumerate((torch.float32, torch.float64, torch.bfloat16, torch.float16)):
        for offset in (0.0, 1.0):
            t = (offset + torch.randn(300_007, generator=g, dtype=torch.float64) * 0.02).to(dtype)
            t[::1000] = 0
            if offset:
                t[17], t[40_000], t[-3] = math.nan, math.inf, -math.inf
            tensors[f"t{i}.{int(offset)}"] = t.view(1009, 300_007 // 1009) if t.numel() % 1009 == 0 else t
    tensors["small"] = torch.randn(100, generator=g)
    path = tmp_path / "model.safetensors"
    save_file(tensors, path)
    streamed, whole = [], []
    monkeypatch.setattr(reduce, "streamed_moments", _spy(reduce.streamed_moments, streamed))
    monkeypatch.setattr("nbinspect.analyze.stats.streamed_moments", reduce.streamed_moments)
    monkeypatch.setattr(FileTensor, "__call__", _spy(FileTensor.__call__, whole))
    from_file = nbinspect.stats(str(path)).set_index("name")
    assert len(streamed) == 8 and len(whole) == 1  # only the small tensor was loaded whole
    in_memory = nbinspect.stats(tensors).set_index("name")
    for name, t in tensors.items():
        check_row(from_file.loc[name], t.double().numpy().reshape(-1))
        for column in ("numel", "min", "max", "zeros", "nan", "inf", "hist_sample"):
            assert from_file.loc[name, column] == in_memory.loc[name, column], (name, column)
        assert np.array_equal(from_file.loc[name, "hist_counts"], in_memory.loc[name, "hist_counts"]), name


def _spy(fn, calls: list):
    def spy(*args, **kwargs):
        calls.append(args)
        return fn(*args, **kwargs)

    return spy


def test_a_file_that_changes_while_it_is_streamed_is_one_line_error(tmp_path, monkeypatch):
    fused = pytest.importorskip("nbinspect.analyze.fused")
    from safetensors.torch import save_file

    from nbinspect.io.safetensors_file import FileTensor

    if fused.kernels(fused.FUSED_ABOVE) is None:
        pytest.skip("numba is not installed")
    monkeypatch.setattr(fused, "LOADED_ABOVE", 0)
    path = tmp_path / "model.safetensors"
    save_file({"w": torch.randn(4 * SAMPLE)}, path)
    read = FileTensor.read_into

    def truncating(self, start, buffer):
        if start > 0:
            with open(path, "r+b") as f:
                f.truncate(1000)
        return read(self, start, buffer)

    monkeypatch.setattr(FileTensor, "read_into", truncating)
    with pytest.raises(nbinspect.CheckpointError, match="changed while it was read"):
        nbinspect.stats(str(path))
