"""compare(): every delta column against a float64 numpy reference, statuses, roll-ups,
and the same answer whatever the sources are (model, state_dict, files)."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file

import nbinspect
from nbinspect import examples
from nbinspect.analyze import compare as cmp
from nbinspect.schema import COMPARE, COMPARE_GROUPS

from ..conftest import assert_unchanged, model_state

THRESHOLDS = (1e-8, 1e-6, 1e-4)


def _reference(a: np.ndarray, b: np.ndarray, thresholds=THRESHOLDS) -> dict:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = b - a
    l2_a, l2_b, l2_d = np.linalg.norm(a), np.linalg.norm(b), np.linalg.norm(d)
    return {
        "numel": a.size,
        "l2_a": l2_a,
        "l2_b": l2_b,
        "l2_delta": l2_d,
        "rel_change": l2_d / l2_a if l2_a else (0.0 if l2_d == 0 else math.inf),
        "change": l2_d / max(l2_a, l2_b) if max(l2_a, l2_b) else 0.0,
        "max_abs_delta": np.abs(d).max(),
        "cosine": float(a @ b) / (l2_a * l2_b) if l2_a and l2_b else None,
        "mean_drift": d.mean(),
        "frac_above": tuple(float((np.abs(d) > t).mean()) for t in thresholds),
    }


def _check(row: pd.Series, ref: dict, rtol: float = 1e-6) -> None:
    for key, value in ref.items():
        if value is None:
            assert pd.isna(row[key]), key
        elif key == "frac_above":
            assert row[key] == pytest.approx(value, abs=1e-12), key
        elif key == "mean_drift":
            assert row[key] == pytest.approx(value, rel=1e-4, abs=1e-12), key
        else:
            assert row[key] == pytest.approx(value, rel=rtol), key


def _perturbed(shape, seed: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """a, and b = a plus deltas drawn from {0, 5e-7, 5e-5, 1e-2} (exact in float32 away
    from every threshold), so counts above thresholds have one right answer."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g, dtype=torch.float64)
    steps = torch.tensor([0.0, 5e-7, 5e-5, 1e-2], dtype=torch.float64)
    pick = torch.randint(0, 4, shape, generator=g)
    sign = torch.randint(0, 2, shape, generator=g) * 2 - 1
    b = a + steps[pick] * sign
    return a.to(dtype), b.to(dtype)


def test_delta_columns_match_float64_reference_across_chunks():
    # 2.5 chunks of elements: exercises the chunk loop and its float64 accumulation.
    a, b = _perturbed((5, int(cmp.CHUNK // 2)), seed=0)
    frame = nbinspect.compare({"w": a}, {"w": b}).frame
    COMPARE.validate(frame)
    row = frame.iloc[0]
    assert row["status"] == "changed"
    _check(row, _reference(a.numpy(), b.numpy()))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int64])
def test_other_dtypes_are_compared_exactly_after_upcast(dtype):
    g = torch.Generator().manual_seed(1)
    a = (torch.randn(3000, generator=g) * 100).to(dtype)
    b = a.clone()
    b[::7] = (b[::7].double() + 3).to(dtype)
    row = nbinspect.compare({"w": a}, {"w": b}).frame.iloc[0]
    _check(row, _reference(a.double().numpy(), b.double().numpy()))


def test_dtype_change_is_a_status_and_still_measured():
    a = torch.linspace(-1, 1, 1001)
    b = a.half()
    row = nbinspect.compare({"w": a}, {"w": b}).frame.iloc[0]
    assert row["status"] == "dtype_changed" and (row["dtype_a"], row["dtype_b"]) == ("float32", "float16")
    _check(row, _reference(a.numpy(), b.float().numpy()))


def test_statuses_and_missing_values():
    a = {
        "same": torch.ones(3),
        "changed": torch.ones(3),
        "reshaped": torch.ones(6),
        "removed": torch.ones(2),
        "zero": torch.zeros(4),
    }
    b = {
        "same": torch.ones(3),
        "changed": torch.tensor([1.0, 2.0, 1.0]),
        "reshaped": torch.ones(2, 3),
        "zero": torch.tensor([0.0, 0, 0, 1]),
        "added": torch.ones(1),
    }
    frame = nbinspect.compare(a, b).frame.set_index("name")
    assert frame["status"].to_dict() == {
        "same": "same",
        "changed": "changed",
        "reshaped": "reshaped",
        "removed": "removed",
        "zero": "changed",
        "added": "added",
    }
    assert list(frame.index) == [
        "same",
        "changed",
        "reshaped",
        "removed",
        "zero",
        "added",
    ]  # a's order, then b's additions
    same = frame.loc["same"]
    assert (
        same["l2_delta"] == 0
        and same["rel_change"] == 0
        and same["cosine"] == pytest.approx(1.0)
        and same["frac_above"] == (0, 0, 0)
    )
    assert math.isinf(frame.loc["zero", "rel_change"]) and pd.isna(frame.loc["zero", "cosine"])
    for name in ("reshaped", "removed", "added"):
        assert pd.isna(frame.loc[name, "numel"]) and pd.isna(frame.loc[name, "l2_delta"])
    assert frame.loc["reshaped", "shape_a"] == (6,) and frame.loc["reshaped", "shape_b"] == (2, 3)
    assert frame.loc["added", "shape_a"] is None and frame.loc["removed", "dtype_b"] is pd.NA


def test_nan_is_a_change():
    a = torch.tensor([1.0, float("nan"), 3.0])
    b = torch.tensor([1.0, 2.0, 3.0])
    row = nbinspect.compare({"w": b}, {"w": a}).frame.iloc[0]
    assert row["status"] == "changed" and math.isnan(row["max_abs_delta"])
    # the same bits on both sides (a file compared with itself) are no change (issue 25)
    row = nbinspect.compare({"w": a}, {"w": a.clone()}).frame.iloc[0]
    assert row["status"] == "same" and row["max_abs_delta"] == 0 and row["rel_change"] == 0


def test_model_state_dict_and_files_agree(tmp_path):
    a, b = examples.build("tiny_lm", seed=0), examples.build("tiny_lm", seed=1)
    before = model_state(a), model_state(b)
    in_memory = nbinspect.compare(a, b).frame
    assert_unchanged(before[0], model_state(a))
    assert_unchanged(before[1], model_state(b))
    save_file({k: v.clone() for k, v in a.state_dict().items()}, tmp_path / "a.safetensors")
    torch.save(b.state_dict(), tmp_path / "b.pt")
    from_files = nbinspect.compare(tmp_path / "a.safetensors", str(tmp_path / "b.pt")).frame
    mixed = nbinspect.compare(a, tmp_path / "b.pt").frame
    key = ["name", "status", "l2_a", "l2_b", "l2_delta", "rel_change", "max_abs_delta", "cosine", "frac_above"]
    expected = in_memory[key].sort_values("name").reset_index(drop=True)
    for other in (from_files, mixed):
        pd.testing.assert_frame_equal(other[key].sort_values("name").reset_index(drop=True), expected)
    sa, sb = a.state_dict(), b.state_dict()
    for row in in_memory.itertuples(index=False):
        _check(row._asdict(), _reference(sa[row.name].numpy(), sb[row.name].numpy()), rtol=1e-5)


def _llama_like(seed: int, layers: int = 2) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sd = {"model.embed_tokens.weight": torch.randn(32, 8, generator=g)}
    for i in range(layers):
        for part in (
            "self_attn.q_proj",
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.o_proj",
            "mlp.gate_proj",
            "mlp.up_proj",
            "mlp.down_proj",
        ):
            sd[f"model.layers.{i}.{part}.weight"] = torch.randn(8, 8, generator=g)
        sd[f"model.layers.{i}.input_layernorm.weight"] = torch.ones(8)
    sd["model.norm.weight"] = torch.ones(8)
    sd["lm_head.weight"] = torch.randn(32, 8, generator=g)
    return sd


def test_roll_ups_of_a_nan_tensor_warn_nothing_and_keep_the_nan():
    """A NaN in one tensor makes its groups' largest change NaN (meant): no numpy RuntimeWarning
    on the way, and the other groups keep the float64 reference's largest change."""
    a = {"x.w": torch.tensor([1.0, 2.0, 3.0]), "y.w": torch.tensor([0.5, -1.0, 4.0])}
    b = {"x.w": torch.tensor([1.0, float("nan"), 3.5]), "y.w": torch.tensor([0.25, -1.5, 4.0])}
    result = nbinspect.compare(a, b)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        modules = result.by_module().set_index("group")
        layers = result.by_layer().set_index("group")
    y = np.abs(b["y.w"].numpy().astype(np.float64) - a["y.w"].numpy().astype(np.float64)).max()
    assert modules.loc["y", "max_abs_delta"] == y == 0.5
    assert math.isnan(modules.loc["x", "max_abs_delta"]) and math.isnan(modules.loc["", "max_abs_delta"])
    assert math.isnan(layers.loc["", "max_abs_delta"])


def test_roll_ups_equal_the_reference_over_their_members():
    a = _llama_like(0)
    b = {
        k: v + (0.01 * (i % 3)) * torch.sin(torch.arange(v.numel()).reshape(v.shape) * 1.0)
        for i, (k, v) in enumerate(a.items())
    }
    result = nbinspect.compare(a, b)

    def ref(names):
        return _reference(
            np.concatenate([a[n].numpy().ravel() for n in names]), np.concatenate([b[n].numpy().ravel() for n in names])
        )

    comps = result.by_component().set_index("group")
    COMPARE_GROUPS.validate(result.by_component())
    assert list(comps.index) == [
        "embedding",
        "attn.q",
        "attn.k",
        "attn.v",
        "attn.o",
        "mlp.gate",
        "mlp.up",
        "mlp.down",
        "norm",
        "head",
    ]
    for group in ("attn.q", "mlp.down", "norm"):
        members = [n for n in a if result.frame.set_index("name").loc[n, "component"] == group]
        _check(comps.loc[group], ref(members))
        assert comps.loc[group, "tensors"] == len(members)

    modules = result.by_module().set_index("group")
    assert list(modules.index[:3]) == ["", "model", "model.embed_tokens"]
    _check(modules.loc["model.layers.1"], ref([n for n in a if n.startswith("model.layers.1.")]))
    _check(modules.loc[""], ref(list(a)))

    layers = result.by_layer().set_index("group")
    assert list(layers.index) == ["", "0", "1"] and layers.loc["1", "layer"] == 1
    per_layer = result.by_component(per_layer=True)
    row = per_layer[(per_layer["group"] == "attn.v") & (per_layer["layer"] == 0)].iloc[0]
    _check(row, ref(["model.layers.0.self_attn.v_proj.weight"]))


def test_changed_counts_and_thresholds_are_kept():
    a = {"x": torch.zeros(10), "y": torch.ones(10)}
    b = {"x": torch.zeros(10), "y": torch.ones(10) + 1e-3}
    result = nbinspect.compare(a, b, thresholds=(1e-2, 1e-5))
    assert result.thresholds == (1e-5, 1e-2)
    root = result.by_module().iloc[0]
    assert root["tensors"] == 2 and root["differ"] == 1
    assert root["frac_above"] == pytest.approx((0.5, 0.0))


def test_text_json_and_repr():
    result = nbinspect.compare(examples.build("tiny_lm", seed=0), examples.build("tiny_lm", seed=1))
    text = str(result)
    assert text.startswith("Compare TinyLM -> TinyLM\n")
    assert "29 tensors: 19 changed, 10 same" in text
    assert "By component" in text and "attn.qkv" in text and "Most changed tensors" in text
    assert repr(result) == "<Comparison TinyLM -> TinyLM: 19 changed, 10 same>"
    doc = json.loads(result.to_json())
    assert doc["thresholds"] == list(THRESHOLDS) and len(doc["tensors"]) == 29
    assert {"name", "status", "rel_change"} <= set(doc["tensors"][0])


def test_widget_gets_the_compare_frame():
    result = nbinspect.compare(examples.build("tiny_lm", seed=0), examples.build("tiny_lm", seed=1))
    widget = result.widget()
    tensors = widget.payload["tensors"]
    assert len(tensors["compare"]) == len(result.frame)
    assert {status for status, _ in tensors["compare"]} == {"same", "changed"}


def test_meta_tensors_have_no_values_to_compare():
    with torch.device("meta"):
        meta = examples.TinyLM()
    with pytest.raises(ValueError, match=r"tensor 'tok_emb\.weight' is on the meta device in b"):
        nbinspect.compare(examples.build("tiny_lm"), meta)


def test_notebook_display_is_the_widget_with_a_stable_text():
    result = nbinspect.compare({"w": torch.ones(2)}, {"w": torch.zeros(2)})
    bundle = result._repr_mimebundle_()
    assert bundle["text/plain"] == "<Comparison state_dict -> state_dict: 1 changed>"
    assert "application/vnd.jupyter.widget-view+json" in bundle


@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_values_that_cannot_be_compared_name_the_tensor():
    q = torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.qint8)
    with pytest.raises(ValueError, match=r"compare: tensor 'w' \(qint8 vs qint8\)"):
        nbinspect.compare({"w": q}, {"w": q})


def test_tie_stored_once_in_a_file_is_not_a_difference(tmp_path):
    from safetensors.torch import save_model

    from nbinspect import examples

    model = examples.build("tiny_lm")
    path = tmp_path / "lm.safetensors"
    save_model(model, str(path))  # keeps one of the two tied paths
    for a, b in ((path, model), (model, path)):
        frame = nbinspect.compare(a, b).frame
        assert set(frame["status"]) == {"same"}, frame[frame["status"] != "same"][["name", "status"]]
        stored = len(nbinspect.params(path))
        assert len(frame) == stored == len(nbinspect.params(model)) - 1
    untied = {k: v.clone() for k, v in model.state_dict().items()}  # both paths, separate memory
    frame = nbinspect.compare(model, untied).frame.set_index("name")
    assert frame.loc["lm_head.weight", "status"] == "same"  # present on both sides: compared


def test_the_compared_tree_holds_what_only_b_has():
    from torch import nn

    a = nn.Sequential()
    a.body, a.head = nn.Linear(4, 4), nn.Linear(4, 2)
    b = nn.Sequential()
    b.body, b.classifier = nn.Linear(4, 4), nn.Linear(4, 2)  # head renamed: removed + added
    result = nbinspect.compare(a, b)
    layers = result.frames["layers"]
    assert list(layers["name"]) == ["", "body", "head", "classifier"]  # pre-order, b's new child last
    assert list(layers["parent"].iloc[1:]) == ["", "", ""]
    params = result.frames["params"]
    assert set(params["name"]) == {
        "body.weight",
        "body.bias",
        "head.weight",
        "head.bias",
        "classifier.weight",
        "classifier.bias",
    }
    payload = result._payload()
    tensors, modules = payload["tensors"], list(layers["name"])
    names = [f"{modules[m]}.{k}" if modules[m] else k for m, k in zip(tensors["module"], tensors["key"])]
    status = dict(zip(names, (row[0] for row in tensors["compare"])))
    assert status["classifier.weight"] == "added" and status["head.weight"] == "removed"
    assert status["body.weight"] == "changed"


def test_stats_a_must_match_the_bins_and_be_per_tensor():
    """Statistics of a with other bins, or module roll-ups, would be laid over b's
    histograms silently: refused, naming what was given."""
    a, b = examples.build("mlp"), examples.build("mlp")
    with pytest.raises(ValueError, match=r"with 8 bins .*histograms of \[64\] bins"):
        nbinspect.compare(a, b, bins=8, stats_a=nbinspect.inspect(a).stats)
    with pytest.raises(ValueError, match="module roll-ups"):
        nbinspect.compare(a, b, stats_a=nbinspect.stats(a, by="module"))
    fitting = nbinspect.inspect(a, bins=8).stats
    assert nbinspect.compare(a, b, bins=8, stats_a=fitting)._side_stats["stats_a"] is fitting


class _Biased(torch.nn.Module):
    """A layer whose bias starts at zero (as most do), and one left alone."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(6, 5)
        self.frozen = torch.nn.Linear(6, 5)
        torch.nn.init.zeros_(self.fc.bias)


def _fine_tuned() -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(3)
    a = _Biased()
    b = _Biased()
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.fc.weight.add_(0.01 * torch.randn(5, 6))
        b.fc.bias.add_(1e-3 * torch.randn(5))  # a zero start moved a little
    return a, b


def test_a_zero_initialised_bias_ranks_by_a_change_defined_for_zero_starts():
    a, b = _fine_tuned()
    c = nbinspect.compare(a, b)
    rows = c.frame.set_index("name")
    assert rows.at["fc.bias", "rel_change"] == math.inf  # ‖Δ‖/‖a‖ has no answer for a zero start
    for name in ("fc.bias", "fc.weight", "frozen.weight"):
        ref = _reference(a.get_parameter(name).detach().numpy(), b.get_parameter(name).detach().numpy())
        assert rows.at[name, "change"] == pytest.approx(ref["change"], rel=1e-7, abs=1e-12)  # float32 sums
    assert rows.at["fc.bias", "change"] == pytest.approx(1.0)  # moved from nothing: all of it is change
    # ranked above the unchanged tensors, and above the small relative update of the weight
    order = rows.sort_values("change", ascending=False).index.tolist()
    assert order[:2] == ["fc.bias", "fc.weight"]
    text = str(c)
    assert "inf" not in text
    most = text.split("Most changed tensors")[1]
    assert most.index("fc.bias") < most.index("fc.weight")
    assert "frozen" not in most  # unchanged tensors are not "changed"
    assert "Change = ||b - a|| / max(||a||, ||b||)" in text


def test_the_root_change_is_the_overall_change_the_text_prints():
    a, b = _fine_tuned()
    c = nbinspect.compare(a, b)
    sa = {k: v.double().numpy().ravel() for k, v in a.state_dict().items()}
    sb = {k: v.double().numpy().ravel() for k, v in b.state_dict().items()}
    all_a, all_b = np.concatenate(list(sa.values())), np.concatenate(list(sb.values()))
    overall = _reference(all_a, all_b)["change"]
    p = c._payload()
    assert p["modules"]["change"][0] == pytest.approx(overall, rel=1e-5)
    # the largest tensor change is 1.0 (the bias): the root does not show it
    assert max(ch for _, ch in p["tensors"]["compare"]) == pytest.approx(1.0, rel=1e-5)
    overall_line = next(line for line in str(c).splitlines() if line.startswith("(all)"))
    assert f"{overall:.3g}" in overall_line.split()


def test_a_fold_shows_its_members_change_as_one_tensor():
    torch.manual_seed(0)
    a = examples.build("tiny_lm")
    b = examples.build("tiny_lm")
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b.blocks[1].mlp[0].weight.mul_(1.5)
    c = nbinspect.compare(a, b)
    p = c._payload()
    assert p["folds"]["path"] == ["blocks.0–1"]
    members = {k: v for k, v in a.state_dict().items() if k.startswith("blocks.")}
    ra = np.concatenate([v.double().numpy().ravel() for v in members.values()])
    rb = np.concatenate([b.state_dict()[k].double().numpy().ravel() for k in members])
    assert p["folds"]["change"][0] == pytest.approx(_reference(ra, rb)["change"], rel=1e-5)


def test_the_change_histogram_matches_numpy_over_plus_minus_the_largest_change():
    a, b = _fine_tuned()
    c = nbinspect.compare(a, b)
    hists = cmp.delta_histograms(a, b, c.frames["compare"], bins=16).set_index("name")
    assert set(hists.index) == {"fc.weight", "fc.bias"}  # the changed tensors only
    for name in hists.index:
        d = (b.get_parameter(name).detach().double() - a.get_parameter(name).detach().double()).numpy().ravel()
        largest = np.abs(d).max()
        counts, edges = np.histogram(d, bins=16, range=(-largest, largest))
        np.testing.assert_allclose(hists.at[name, "hist_edges"], edges, rtol=1e-6)
        assert hists.at[name, "hist_counts"].sum() == d.size
        # float32 max |Δ| against float64: a value on a bin edge may fall either side
        assert np.abs(hists.at[name, "hist_counts"] - counts).sum() <= 2
