"""The widget's payload (built from frames only), InspectWidget and the standalone page."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
import pytest
import torch

import nbinspect
from nbinspect import examples
from nbinspect.analyze.compare import compare_frame
from nbinspect.analyze.stats import stats as stats_frame
from nbinspect.analyze.views import view_data
from nbinspect.render.html import standalone_html
from nbinspect.render.payload import INLINE_BINS, build_payload, histogram
from nbinspect.render.widget import InspectWidget, bundle_source


def _payload(name, framework, totals, frames, sides=None, timeline=None):
    """The payload as a result builds it: the views decided from the frames, then rendered."""
    return build_payload(name, framework, totals, frames, sides, timeline, views=view_data(frames))


def payload_of(insp, **extra):
    return _payload(insp.name, insp.framework, insp.totals, {**insp.frames, **extra})


def strict_json(obj) -> str:
    return json.dumps(obj, allow_nan=False)


def test_payload_columns_line_up_with_the_frames(zoo_name):
    insp = nbinspect.inspect(examples.build(zoo_name), stats=False)
    p = payload_of(insp)
    strict_json(p)
    layers, params = insp.layers, insp.params
    for column, values in p["modules"].items():
        assert len(values) == len(layers), column
    for column, values in p["tensors"].items():
        assert len(values) == len(params), column
    # parents point back at the frame's parent paths; keys rebuild the dotted names
    names = layers["name"].tolist()
    paths = []
    for key, parent in zip(p["modules"]["key"], p["modules"]["parent"]):
        paths.append("" if parent < 0 else key if paths[parent] == "" else f"{paths[parent]}.{key}")
    assert paths == names
    assert p["modules"]["params"] == layers["params"].tolist()
    assert [names[m] for m in p["tensors"]["module"]] == params["module"].tolist()
    assert p["totals"]["total_params"] == insp.totals["total_params"]
    assert "stats" not in p["tensors"] and "stats" not in p["modules"]  # frames absent, columns absent
    assert "compare" not in p["tensors"] and "flops" not in p["modules"]


def test_tied_and_frozen_facts_travel():
    insp = nbinspect.inspect(examples.build("tiny_lm"))
    t = payload_of(insp)["tensors"]
    i = t["key"].index("weight", t["module"].index(insp.layers["name"].tolist().index("lm_head")))
    assert t["tied_to"][i] == "tok_emb.weight"
    frozen = payload_of(nbinspect.inspect(examples.build("frozen")))
    assert any(f > 0 for f in frozen["modules"]["frozen"])
    assert False in frozen["tensors"]["requires_grad"]


def test_stats_frame_gives_rows_stats_and_small_histograms():
    model = examples.build("mlp")
    insp = nbinspect.inspect(model)
    stats = stats_frame(model, bins=64)
    p = payload_of(insp, stats=stats)
    strict_json(p)
    t = p["tensors"]
    assert p["stat_fields"][:5] == ["numel", "mean", "std", "min", "max"]
    for name, values, hist in zip(insp.params["name"], t["stats"], t["hist"]):
        row = stats[stats["name"] == name].iloc[0]
        assert values[1] == pytest.approx(row["mean"], rel=1e-5, abs=1e-12)
        assert len(hist["c"]) <= INLINE_BINS
        assert sum(hist["c"]) == sum(row["hist_counts"])  # coarsening keeps every count
        assert hist["e"][0] == pytest.approx(row["hist_edges"][0], rel=1e-5)
        assert hist["e"][-1] == pytest.approx(row["hist_edges"][-1], rel=1e-5)
        assert len(hist["e"]) == 2  # uniform bins travel as [lo, hi]
    fine = histogram(view_data({"stats": stats}), insp.params["name"].iloc[0])
    assert fine["c"] == list(stats["hist_counts"].iloc[0])
    assert len(fine["e"]) == 65
    assert histogram(view_data({"stats": stats}), "no.such.tensor") is None
    assert histogram(view_data({"params": insp.params}), insp.params["name"].iloc[0]) is None


def test_nan_and_inf_travel_as_null():
    model = examples.build("mlp")
    with torch.no_grad():
        model.body[0].weight.fill_(float("nan"))
        model.body[0].bias[0] = float("inf")
    insp = nbinspect.inspect(model)
    p = payload_of(insp, stats=stats_frame(model))
    text = strict_json(p)
    bare = text.replace('"NaN', '"').replace('Inf"', '"')  # the problem labels are strings
    assert "NaN" not in bare and "Infinity" not in bare
    assert p["tensors"]["problems"][:2] == ["NaN", "Inf"]
    fields = p["stat_fields"]
    weight, bias = p["tensors"]["stats"][:2]
    assert weight[fields.index("mean")] is None and weight[fields.index("nan")] == 2048
    assert bias[fields.index("inf")] == 1 and bias[fields.index("max")] is not None


def test_uneven_histogram_edges_are_kept_and_missing_rows_are_null():
    insp = nbinspect.inspect(examples.build("mlp"))
    row = {
        "name": insp.params["name"].iloc[0],
        "mean": 0.5,
        "hist_counts": [1, 2, 3, 4],
        "hist_edges": [-1.0, -0.5, 0.0, 1.0, 2.0],
    }
    p = payload_of(insp, stats=pd.DataFrame([row]))
    assert p["tensors"]["hist"][0] == {"e": [-1.0, -0.5, 0.0, 1.0, 2.0], "c": [1, 2, 3, 4]}
    assert p["tensors"]["stats"][0][p["stat_fields"].index("mean")] == 0.5
    assert p["tensors"]["stats"][1] is None and p["tensors"]["hist"][1] is None


def test_module_stats_compare_and_trace_columns_are_used_when_present():
    model = examples.build("cnn")
    traced = nbinspect.trace(model, (2, 3, 32, 32))
    names = traced.layers["name"].tolist()
    module_stats = stats_frame(model, by="module")
    both = pd.concat([stats_frame(model), module_stats], ignore_index=True)  # one frame, told apart by kind
    other = examples.build("cnn")
    with torch.no_grad():
        other.classifier[2].weight.mul_(2)
    compare = compare_frame(model, other)
    p = payload_of(traced, stats=both, compare=compare)
    strict_json(p)
    assert p["modules"]["flops"] == traced.layers["flops"].tolist()
    assert p["modules"]["flops"][0] > 0
    assert p["modules"]["output_shapes"][0] == [[2, 10]]  # one output tensor
    mean = p["stat_fields"].index("mean")
    conv = names.index("features.0")
    assert p["modules"]["stats"][conv][mean] == pytest.approx(
        module_stats.set_index("name").loc["features.0", "mean"], rel=1e-5
    )
    assert p["modules"]["note"][names.index("features.2")] == "no parameters"
    status = dict(zip(traced.params["name"], p["tensors"]["compare"]))
    # b = 2a: ‖Δ‖ = ‖a‖, over max(‖a‖, ‖b‖) = 2‖a‖
    assert status["classifier.2.weight"] == ["changed", pytest.approx(0.5)]
    assert status["features.0.weight"] == ["same", 0.0]
    assert histogram(view_data({"stats": both}), "features.0", kind="module")["c"] == list(
        module_stats.set_index("name").loc["features.0", "hist_counts"]
    )
    assert histogram(view_data({"stats_by_module": module_stats}), "features.0", kind="module") is not None


def test_inspect_widget_is_handed_frames_and_answers_histogram_requests():
    model = examples.build("mlp")
    insp = nbinspect.inspect(model)
    stats = stats_frame(model)
    frames = {**insp.frames, "stats": stats}
    w = InspectWidget(_payload(insp.name, "torch", insp.totals, frames), view_data(frames))
    assert w._esm == bundle_source()
    assert w.payload["model"] == {"name": "MLP", "framework": "torch"}
    assert w.selected is None
    name = insp.params["name"].iloc[2]
    response, buffers = w._histogram({"name": name, "kind": "tensor"}, [])
    assert response["c"] == list(stats.set_index("name").loc[name, "hist_counts"]) and buffers == []
    assert repr(w) == "<InspectWidget MLP: 7 modules, selected=None>"
    w.selected = "body.0"
    assert "selected='body.0'" in repr(w)


def test_the_payload_travels_as_one_buffer_of_json():
    """ipywidgets sends bytes as a binary buffer and does not walk them (a dict it walks
    twice); the front-end parses the JSON (js/src/index.ts payloadOf)."""
    from ipywidgets.widgets.widget import _remove_buffers

    w = nbinspect.inspect(examples.build("cnn")).widget()
    state, paths, buffers = _remove_buffers(w.get_state())
    assert paths == [["payload"]] and "payload" not in state
    assert json.loads(bytes(buffers[0])) == w.payload and w.payload["model"]["name"] == "SmallCNN"
    w.payload = {**w.payload, "model": {"name": "Other", "framework": "torch"}}  # an update travels the same way
    assert json.loads(w.get_state("payload")["payload"])["model"]["name"] == "Other"


def test_the_widget_and_its_saved_view_carry_one_json_text(monkeypatch):
    """The payload is written to JSON once for the widget's message and the saved view, and
    again only when it changes."""
    from ipywidgets.widgets.widget import _remove_buffers

    from nbinspect.render import widget as widget_module

    written = []
    text = widget_module.payload_text
    monkeypatch.setattr(widget_module, "payload_text", lambda payload: written.append(1) or text(payload))
    w = nbinspect.inspect(examples.build("cnn")).widget()
    _, _, buffers = _remove_buffers(w.get_state())
    saved = html.unescape(re.search(r'data-payload="([^"]*)"', w.saved_bundle()["text/html"]).group(1))
    assert saved == bytes(buffers[0]).decode() and json.loads(saved) == w.payload
    assert len(written) == 1
    w.payload = {**w.payload, "model": {"name": "Other", "framework": "torch"}}
    assert json.loads(w.get_state("payload")["payload"])["model"]["name"] == "Other"
    assert "&quot;Other&quot;" in w.saved_bundle()["text/html"] and len(written) == 2


def test_the_widget_and_the_saved_text_tree_fold_once(calls):
    """The views and the saved view's text tree share one ``fold_repeats`` (the same frames):
    the same folds as the views would find by themselves."""
    from nbinspect import inspection
    from nbinspect.analyze import views

    insp = nbinspect.trace(examples.build("tiny_lm"), (2, 16), input_dtype=torch.int64)
    in_views, in_inspection = calls(views, "fold_repeats"), calls(inspection, "fold_repeats")
    insp._repr_mimebundle_()  # the widget and the saved view with its text tree
    assert len(in_views) + len(in_inspection) == 1
    assert insp._views.folds is insp._folds
    alone = view_data(insp._widget_frames()).folds
    assert alone == insp._folds and insp._folds.first  # tiny_lm's blocks fold


def test_inspection_displays_as_the_widget_with_a_stable_text_repr():
    insp = nbinspect.inspect(examples.build("cnn"))
    bundle = insp._repr_mimebundle_()
    assert bundle["text/plain"] == repr(insp)
    assert "0x" not in repr(insp)
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    assert isinstance(insp.widget(), InspectWidget)


def test_show_displays_the_widget(monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    insp = nbinspect.inspect(examples.build("mlp"))
    w = insp.show()
    assert shown == [w] and isinstance(w, InspectWidget)


def test_standalone_page_inlines_bundle_and_payload(tmp_path):
    insp = nbinspect.inspect(examples.build("tiny_lm"))
    page = insp.to_html(tmp_path / "m.html")
    assert (tmp_path / "m.html").read_text(encoding="utf-8") == page
    assert not re.search(r"(src|href)=\"https?:", page)  # nothing fetched from the network
    data = re.search(r'<script type="application/json" id="nbinspect-payload">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data) == json.loads(strict_json(payload_of(insp)))
    assert "<title>TinyLM — nbinspect</title>" in page


def test_standalone_page_cannot_be_broken_out_of():
    hostile = "</script><script>alert(1)</script><!--"
    insp = nbinspect.inspect(examples.build("mlp"))
    p = payload_of(insp)
    p["modules"]["type"][1] = hostile
    p["modules"]["attrs"][1] = {"extra_repr": hostile}
    page = standalone_html(p, "const s = '</script><script>alert(2)</script>';", title="<b>x</b>")
    assert page.count("</script>") == 3  # only the page's own three script elements close
    assert "<script>alert(1)" not in page  # the payload's "<" travel as \\u003c
    bundle = re.search(r'id="nbinspect-bundle">(.*?)</script>', page, re.S).group(1)
    assert bundle == "const s = '<\\/script><script>alert(2)<\\/script>';"  # the same string to JS
    assert "<title>&lt;b&gt;x&lt;/b&gt;</title>" in page
    data = re.search(r'id="nbinspect-payload">(.*?)</script>', page, re.S).group(1)
    assert json.loads(data)["modules"]["type"][1] == hostile


def test_default_inspection_carries_tensor_and_module_stats():
    insp = nbinspect.inspect(examples.build("cnn"))
    p = payload_of(insp)
    names = insp.layers["name"].tolist()
    features = names.index("features")
    mean = p["stat_fields"].index("mean")
    assert p["modules"]["stats"][features][mean] == pytest.approx(
        insp.stats_by_module.set_index("name").loc["features", "mean"], rel=1e-5
    )
    assert sum(p["modules"]["hist"][features]["c"]) > 0
    assert all(row is not None for row in p["tensors"]["stats"])


def test_health_travels_per_tensor_and_rolled_up_per_module():
    model = examples.build("tiny_lm")
    with torch.no_grad():
        model.blocks[1].attn.qkv.weight[0, 0] = float("nan")
        model.blocks[0].mlp[0].weight.zero_()
    insp = nbinspect.inspect(model)
    p = _payload(insp.name, insp.framework, insp.totals, insp.frames)
    problems = dict(zip(insp.params["name"], p["tensors"]["problems"]))
    assert {n: v for n, v in problems.items() if v} == {
        "blocks.0.mlp.0.weight": "all zero",
        "blocks.1.attn.qkv.weight": "NaN",
    }
    rolled = dict(zip(insp.layers["name"], zip(p["modules"]["problems"], p["modules"]["problem_tensors"])))
    assert rolled[""] == ("NaN, all zero", 2) and rolled["blocks.1.attn"] == ("NaN", 1)
    assert rolled["blocks.0.attn"] == ("", 0) and rolled["tok_emb"] == ("", 0)


def test_module_histograms_count_the_weight_matrices_only():
    model = examples.build("tiny_lm")
    insp = nbinspect.inspect(model)
    p = _payload(insp.name, insp.framework, insp.totals, insp.frames)
    row = insp.layers["name"].tolist().index("blocks.0.attn")
    hist, scope = p["modules"]["hist"][row], p["modules"]["hist_scope"][row]
    attn = model.blocks[0].attn
    matrices = [attn.qkv.weight.detach(), attn.proj.weight.detach()]  # the biases (1 dim) are left out
    assert scope == "weight matrices"
    assert sum(hist["c"]) == sum(w.numel() for w in matrices)
    assert hist["e"][0] == pytest.approx(min(float(w.min()) for w in matrices), rel=1e-5)
    assert hist["e"][-1] == pytest.approx(max(float(w.max()) for w in matrices), rel=1e-5)
    norm = insp.layers["name"].tolist().index("blocks.0.ln_1")
    assert p["modules"]["hist_scope"][norm] == "all values"  # a LayerNorm has no matrix: all its values
    fine = histogram(view_data(insp.frames | {"params": insp.params}), "blocks.0.attn", kind="module")
    assert sum(fine["c"]) == sum(hist["c"]) and len(fine["c"]) == 64


def test_a_module_histogram_request_merges_that_module_only(calls):
    from nbinspect.analyze import views as views_module

    insp = nbinspect.inspect(examples.build("tiny_lm"))
    w = insp.widget()
    every = view_data(insp.frames).matrices  # the payload's roll-up, decided once
    merges = calls(views_module, "_merged", lambda runs: [len(r) for r in runs])  # matrices merged per request
    for name, (counts, edges) in every.items():
        response, _ = w._histogram({"name": name, "kind": "module"}, [])
        assert response == {"e": [float(f"{e:.6g}") for e in edges], "c": counts.tolist()}, name
    assert len(every) == 18 and merges == []  # was 18 x 18, then 18: now a request merges nothing
    assert every["blocks.0.attn"][0].sum() == 3 * 64 * 64 + 64 * 64  # qkv and proj weights, the biases left out
    # a module with one matrix: the numbers are that tensor's own histogram in the stats frame
    qkv, _ = w._histogram({"name": "blocks.0.attn.qkv", "kind": "module"}, [])
    assert qkv == histogram(view_data(insp.frames), "blocks.0.attn.qkv.weight") and sum(qkv["c"]) == 3 * 64 * 64


def test_comparison_payload_has_deltas_both_histograms_and_components():
    a, b = examples.build("mlp"), examples.build("mlp")
    with torch.no_grad():
        b.body[0].weight.mul_(2)
    c = nbinspect.compare(a, b)
    p = c.widget().payload
    assert p["comparison"]["a"] == p["comparison"]["b"] == "MLP"
    j = c.frames["params"]["name"].tolist().index("body.0.weight")
    w = a.body[0].weight.detach().double()
    assert p["tensors"]["max_abs_delta"][j] == pytest.approx(float(w.abs().max()), rel=1e-5)
    assert p["tensors"]["cosine"][j] == pytest.approx(1.0, abs=1e-6)
    assert p["tensors"]["mean_drift"][j] == pytest.approx(float(w.mean()), rel=1e-4, abs=1e-9)
    ha, hb = p["tensors"]["hist_a"][j], p["tensors"]["hist_b"][j]
    assert ha["e"] == hb["e"]  # one range for before and after
    assert sum(ha["c"]) == sum(hb["c"]) == w.numel()
    assert hb["e"][-1] == pytest.approx(2 * float(w.max()), rel=1e-5)  # b is twice as wide
    components = p["comparison"]["components"]
    assert components["component"] == c.by_component()["group"].tolist()
    assert sum(components["differ"]) == 1
