"""Sharded models on 2 real gloo processes: every global figure against a single-process
float64 reference of the unsharded model.

The model mixes what sharding makes hard: a weight sharded on dim 0 (5 rows: 3 + 2), one
on dim 1 (5 columns: 3 + 2), a replicated bias with NaN/Inf/zeros around, a Partial
parameter (each rank holds half), a plain buffer, and a tensor above the exact-histogram
size. The same model under FSDP2 ``fully_shard`` is checked too.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect

from ..distributed_support import run_on_ranks

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed is not built in")

STAT_COLUMNS = ["numel", "mean", "std", "min", "max", "abs_mean", "l2", "zeros", "nan", "inf"]


def reference_model(specials: bool = True, shift: float = 0.0) -> nn.Module:
    torch.manual_seed(0)
    m = nn.Module()
    m.a = nn.Linear(7, 5)
    m.b = nn.Linear(5, 9)
    m.big = nn.Linear(300, 301, bias=False)  # 90,300 elements: above the exact-histogram size
    m.p = nn.Parameter(torch.randn(4, 3))
    m.register_buffer("steps", torch.arange(6.0))
    with torch.no_grad():
        if specials:
            m.a.weight[0, 0] = math.nan
            m.a.weight[1, :3] = 0.0
            m.b.weight[2, 4] = math.inf
            m.b.bias[3] = -math.inf
            m.a.bias[2] = 0.0
        m.b.weight[:, 1] += shift
    return m


def shard(m: nn.Module) -> nn.Module:
    """Shard(0) uneven, Shard(1) uneven, replicated biases, a Partial parameter."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    mesh = init_device_mesh("cpu", (2,))
    plan = {
        "a.weight": Shard(0),
        "a.bias": Replicate(),
        "b.weight": Shard(1),
        "b.bias": Replicate(),
        "big.weight": Shard(0),
    }
    for name, placement in plan.items():
        owner, _, local = name.rpartition(".")
        module = m.get_submodule(owner)
        setattr(module, local, nn.Parameter(distribute_tensor(getattr(module, local).detach(), mesh, [placement])))
    m.p = nn.Parameter(DTensor.from_local(m.p.detach() / 2, mesh, [Partial()]))  # halves: exact in binary
    return m


def fsdp(m: nn.Module) -> nn.Module:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (2,))
    fully_shard(m.a, mesh=mesh)
    fully_shard(m, mesh=mesh)
    return m


def on_each_rank(rank: int, dcp_folder: str) -> dict:
    import torch.distributed.checkpoint as dcp

    sharded = shard(reference_model())
    dcp.save(
        {k: v for k, v in sharded.state_dict().items() if k != "p"}, checkpoint_id=dcp_folder
    )  # each rank its shards
    fsdp_model = fsdp(reference_model())
    clean_a, clean_b = shard(reference_model(False)), shard(reference_model(False, shift=0.25))
    every = nbinspect.distributed(sharded, rank=None)
    return {
        "stats": nbinspect.stats(sharded),
        "stats_module": nbinspect.stats(sharded, by="module"),
        "stats_every": nbinspect.stats(every),
        "params": nbinspect.params(sharded),
        "layers": nbinspect.layers(sharded),
        "totals": nbinspect.totals(sharded),
        "inspect": None if (insp := nbinspect.inspect(sharded)) is None else dict(insp.frames),
        "fsdp_stats": nbinspect.stats(fsdp_model),
        "fsdp_layers": nbinspect.layers(fsdp_model),
        "compare_sharded": _frame(nbinspect.compare(clean_a, clean_b)),
        "compare_plain_b": _frame(nbinspect.compare(clean_a, reference_model(False, shift=0.25).state_dict())),
        "compare_layouts": _frame(nbinspect.compare(fsdp(reference_model(False)), clean_b)),
        "local_a_weight": tuple(sharded.a.weight.to_local().shape),
    }


def _frame(comparison):
    return None if comparison is None else comparison.frame


@pytest.fixture(scope="module")
def dcp_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("dcp")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory, dcp_folder):
    return run_on_ranks(partial(on_each_rank, dcp_folder=str(dcp_folder)), tmp_path_factory.mktemp("ranks"))


def float64_stats(values: list[torch.Tensor], bins: int = 64) -> dict:
    """numpy float64 statistics of the concatenated values: the independent reference."""
    x = np.concatenate([v.detach().double().reshape(-1).numpy() for v in values])
    finite = x[np.isfinite(x)]
    mean = finite.mean()
    return {
        "numel": x.size,
        "mean": mean,
        "std": np.sqrt(((finite - mean) ** 2).mean()),
        "min": finite.min(),
        "max": finite.max(),
        "abs_mean": np.abs(finite).mean(),
        "l2": np.sqrt((finite**2).sum()),
        "zeros": np.count_nonzero(x == 0) / x.size,
        "nan": np.isnan(x).sum(),
        "inf": np.isinf(x).sum(),
        "hist": np.histogram(finite, bins, range=(finite.min(), finite.max()))[0],
    }


def check_row(row: pd.Series, ref: dict) -> None:
    for column in STAT_COLUMNS:
        assert row[column] == pytest.approx(ref[column], rel=1e-12, abs=1e-15), (row["name"], column)
    np.testing.assert_array_equal(row["hist_counts"], ref["hist"], err_msg=row["name"])
    assert row["hist_counts"].sum() == ref["numel"] - ref["nan"] - ref["inf"]


def test_the_shards_are_uneven(ranks):
    assert [r["local_a_weight"] for r in ranks] == [(3, 7), (2, 7)]


def test_tensor_stats_match_the_unsharded_float64_reference(ranks):
    reference = reference_model()
    frame = ranks[0]["stats"].set_index("name", drop=False)
    assert list(frame["name"]) == list(nbinspect.params(reference)["name"])
    for name, tensor in (*reference.named_parameters(), *reference.named_buffers()):
        check_row(frame.loc[name], float64_stats([tensor]))
    assert frame.loc["a.weight", "nan"] == 1 and frame.loc["b.weight", "inf"] == 1 and frame.loc["b.bias", "inf"] == 1
    assert frame.loc["p", "mean"] == pytest.approx(
        float(reference.p.detach().double().mean()), rel=1e-12
    )  # Partial summed


def test_module_rollups_match_the_reference(ranks):
    reference = reference_model()
    frame = ranks[0]["stats_module"].set_index("name", drop=False)
    for path in ("", "a", "b", "big"):
        tensors = [p for _, p in reference.get_submodule(path).named_parameters()]
        ref = float64_stats(tensors)
        row = frame.loc[path]
        for column in STAT_COLUMNS:
            assert row[column] == pytest.approx(ref[column], rel=1e-12), (path, column)
        assert row["hist_counts"].sum() == ref["numel"] - ref["nan"] - ref["inf"]


def test_single_process_stats_agree_except_sampled_histograms(ranks):
    """The single-process large-tensor path sums float32 chunks (within 1e-7); small ones are exact."""
    local = nbinspect.stats(reference_model()).set_index("name")
    sharded = ranks[0]["stats"].set_index("name")
    pd.testing.assert_frame_equal(
        sharded[STAT_COLUMNS].astype(float), local[STAT_COLUMNS].astype(float), rtol=1e-7, check_exact=False
    )
    small = local["numel"] <= 65536
    for name in local.index[small]:
        np.testing.assert_array_equal(sharded.loc[name, "hist_counts"], local.loc[name, "hist_counts"])


def test_structure_frames_are_global(ranks):
    reference = reference_model()
    pd.testing.assert_frame_equal(ranks[0]["params"], nbinspect.params(reference))
    layers = ranks[0]["layers"].drop(columns="attrs")
    pd.testing.assert_frame_equal(layers, nbinspect.layers(reference).drop(columns="attrs"))
    assert ranks[0]["totals"] == nbinspect.totals(reference)
    assert ranks[0]["totals"]["total_params"] == sum(p.numel() for p in reference.parameters())


def test_fsdp2_fully_shard_gives_the_same_global_numbers(ranks):
    reference = reference_model()
    frame = ranks[0]["fsdp_stats"].set_index("name", drop=False)
    for name, tensor in reference.named_parameters():
        check_row(frame.loc[name], float64_stats([tensor]))
    assert list(ranks[0]["fsdp_layers"]["type"]) == ["Module", "Linear", "Linear", "Linear"]  # not FSDPLinear


def test_frames_go_to_rank_0_by_default_or_to_every_rank(ranks):
    first, second = ranks
    for key in ("stats", "params", "layers", "totals", "inspect", "compare_sharded", "fsdp_stats"):
        assert first[key] is not None and second[key] is None, key
    pd.testing.assert_frame_equal(second["stats_every"], first["stats"])
    pd.testing.assert_frame_equal(first["stats_every"], first["stats"])
    assert set(first["inspect"]) >= {"params", "layers", "stats", "stats_by_module"}


@pytest.mark.parametrize("key", ["compare_sharded", "compare_plain_b", "compare_layouts"])
def test_compare_matches_float64_deltas(ranks, key):
    a, b = reference_model(False).state_dict(), reference_model(False, shift=0.25).state_dict()
    frame = ranks[0][key].set_index("name")
    assert set(frame.index) == set(a)
    for name in a:
        x, y = a[name].double().reshape(-1).numpy(), b[name].double().reshape(-1).numpy()
        d = y - x
        row = frame.loc[name]
        assert row["numel"] == x.size
        assert row["status"] == ("changed" if name == "b.weight" else "same")
        assert row["l2_a"] == pytest.approx(np.linalg.norm(x), rel=1e-7)  # float32 products, as single-process
        assert row["l2_delta"] == pytest.approx(np.linalg.norm(d), rel=1e-7, abs=0)
        assert row["max_abs_delta"] == pytest.approx(np.abs(d).max(), rel=1e-7, abs=0)
        assert row["mean_drift"] == pytest.approx(d.mean(), rel=1e-7, abs=1e-15)
    assert frame.loc["b.weight", "frac_above"][0] == pytest.approx(9 / 45)  # one column of 9 rows moved


def test_a_dcp_folder_written_by_both_ranks_reads_in_one_process(ranks, dcp_folder):
    assert sorted(p.name for p in dcp_folder.glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    reference = reference_model()
    frame = nbinspect.stats(dcp_folder).set_index("name", drop=False)
    assert set(frame.index) == {n for n, _ in reference.named_parameters() if n != "p"} | {"steps"}
    for name in frame.index:
        tensor = reference.get_parameter(name) if name != "steps" else reference.steps
        ref = float64_stats([tensor])
        for column in STAT_COLUMNS:
            assert frame.loc[name, column] == pytest.approx(ref[column], rel=1e-7), (name, column)


def test_without_a_process_group_distributed_says_what_is_missing():
    with pytest.raises(ValueError, match=r"needs torch\.distributed initialised \(init_process_group\) on every rank"):
        nbinspect.distributed(nn.Linear(2, 2))


def _locate_on_rank(rank: int):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    torch.manual_seed(0)
    m = nn.Module()
    m.rows = nn.Linear(6, 7, bias=False)  # Shard(0): rows 0-3 on rank 0, 4-6 on rank 1
    m.cols = nn.Linear(5, 4, bias=False)  # Shard(1): columns split
    m.bias = nn.Parameter(torch.randn(9))  # replicated
    with torch.no_grad():
        m.rows.weight[5, 2] = math.nan
        m.rows.weight[1].zero_()
        m.cols.weight[2].zero_()  # dead across both column shards
        m.cols.weight[0, :3] = 0.0  # zero on rank 0's columns only: not dead
        m.cols.weight[3, 4] = -math.inf
        m.cols.weight[:, 1] = 0.0  # a dead column (input feature 1)
        m.bias[4] = math.inf
    whole = {n: p.detach().clone() for n, p in m.named_parameters()}
    mesh = init_device_mesh("cpu", (2,))
    m.rows.weight = nn.Parameter(distribute_tensor(m.rows.weight.detach(), mesh, [Shard(0)]))
    m.cols.weight = nn.Parameter(distribute_tensor(m.cols.weight.detach(), mesh, [Shard(1)]))
    m.bias = nn.Parameter(distribute_tensor(m.bias.detach(), mesh, [Replicate()]))
    frame = nbinspect.locate(m, ["nan", "inf", "dead"])
    grids = {  # each rank reduces its own block; rank 0 gets the merged picture
        "rows.weight": nbinspect.value_grid(m, "rows.weight"),
        "cols.weight": nbinspect.value_grid(m, "cols.weight", height=2, width=2),
        "bias": nbinspect.value_grid(m, "bias", height=1, width=4),
    }
    insp = nbinspect.inspect(m, stats=False)  # a widget's requests reach one rank only
    states = None
    if insp is not None:
        states = {name: insp.values.region({"tensor": name})[0] for name in ("rows.weight", "bias")}
        states = {name: (h["state"], h["message"], h.get("counts")) for name, h in states.items()}
    return frame, whole, states, grids


def test_locate_on_a_sharded_model_is_global_and_exact(tmp_path):
    (frame, whole, states, grids), (other, _, _, other_grids) = run_on_ranks(_locate_on_rank, tmp_path)
    assert other is None  # rank 0 receives
    got = {(r.tensor, r.what, r.index, r.total) for r in frame.itertuples()}
    want = set()
    for name, t in whole.items():
        x = t.double().numpy()
        for what, hits in (
            ("nan", np.argwhere(np.isnan(x))),
            ("posinf", np.argwhere(np.isposinf(x))),
            ("neginf", np.argwhere(np.isneginf(x))),
        ):
            want |= {(name, what, tuple(int(i) for i in h), len(hits)) for h in hits}
        if x.ndim == 2:
            rows = np.flatnonzero(np.all(x == 0, axis=1))
            cols = np.flatnonzero(np.all(x == 0, axis=0))
            want |= {(name, "zero_row", (int(r),), len(rows)) for r in rows}
            want |= {(name, "zero_column", (int(c),), len(cols)) for c in cols}
    assert got == want
    assert ("cols.weight", "zero_row", (2,), 1) in got and ("rows.weight", "nan", (5, 2), 1) in got
    # the widget on rank 0: a replicated tensor it holds whole, a sharded one it cannot show
    assert states["bias"][0] == "ok" and states["bias"][2]["posinf"] == 1
    assert states["rows.weight"][0] == "unavailable" and "this rank holds 0–3, 0–5" in states["rows.weight"][1]
    # the merged pictures: exact values, and block means of the finite values (float64 reference)
    assert set(other_grids.values()) == {None}
    rows = grids["rows.weight"]
    assert rows["header"]["exact"] and rows["header"]["counts"]["nan"] == 1
    np.testing.assert_array_equal(rows["value"], whole["rows.weight"].double().numpy())
    cols = grids["cols.weight"]
    assert cols["header"]["block"] == [2, 3] and cols["header"]["counts"]["neginf"] == 1
    x = whole["cols.weight"].double().numpy()
    for i in range(2):
        for j in range(2):
            block = x[2 * i : 2 * i + 2, 3 * j : 3 * j + 3]
            assert cols["value"][i, j] == pytest.approx(block[np.isfinite(block)].mean(), rel=1e-6)
    bias = whole["bias"].double().numpy()
    assert grids["bias"]["header"]["counts"]["posinf"] == 1 and grids["bias"]["header"]["grid"] == [1, 3]
    assert grids["bias"]["value"][0, 0] == pytest.approx(bias[0:3].mean(), rel=1e-6)
