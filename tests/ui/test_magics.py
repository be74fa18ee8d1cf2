"""%inspect_model in a real IPython shell: evaluation scope, options, results, clean errors."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

import nbinspect
from nbinspect import examples


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbinspect")
    shell.run_line_magic("load_ext", "nbinspect")  # a second load is harmless
    shell.run_cell("from nbinspect import examples; nets = [examples.build('mlp'), examples.build('cnn')]")
    yield shell
    InteractiveShell.clear_instance()


def test_line_magic_returns_inspection_of_any_expression(ip):
    insp = ip.run_line_magic("inspect_model", "nets[1].features --text")
    assert isinstance(insp, nbinspect.Inspection)
    assert insp.name == "Sequential"
    assert insp.totals == nbinspect.inspect(examples.build("cnn").features).totals


def test_assignment_form_and_output_variable(ip):
    result = ip.run_cell("insp = %inspect_model nets[0] -o kept --text")
    assert result.success, result.error_in_exec
    assert ip.user_ns["insp"] is ip.user_ns["kept"]
    assert ip.user_ns["insp"].totals["total_params"] == 6922


def test_text_option_prints_the_summary(ip, capsys):
    ip.run_line_magic("inspect_model", "nets[0] --text --depth 1")
    assert capsys.readouterr().out.strip() == nbinspect.inspect(examples.build("mlp")).summary(depth=1)


def test_json_option_writes_the_export(ip, tmp_path):
    path = tmp_path / "m.json"
    ip.run_line_magic("inspect_model", f"nets[0] --text --json {path}")
    assert json.loads(path.read_text())["totals"]["total_params"] == 6922


def test_local_scope_inside_a_function(ip):
    ip.run_cell(
        "def f():\n    local_model = examples.build('shared')\n"
        "    found = %inspect_model local_model --text\n    return found\n"
    )
    result = ip.run_cell("r = f()")
    assert result.success, result.error_in_exec
    assert ip.user_ns["r"].name == "SharedLayerNet"


def test_help_lists_the_options(ip):
    doc = ip.find_line_magic("inspect_model").__doc__
    for option in (
        "--input",
        "--input-shape",
        "--dtype",
        "--depth",
        "--no-stats",
        "--bins",
        "--batch-size",
        "--optimizer",
        "--compare",
        "--json",
        "--html",
        "--text",
        "-o",
    ):
        assert option in doc, option


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("modle", "name 'modle' is not defined"),
        ("nets[5]", "failed: IndexError"),
        ("42", "expected a torch.nn.Module"),
        ("nets[0] --input-shape 1,x,3", "not a comma-separated list of integers"),
        ("nets[0] --input-shape 4,32 --dtype float33", "not a torch dtype"),
        ("nets[0] --bogus", "unrecognized arguments"),
    ],
)
def test_errors_are_one_line_usage_errors(ip, line, message):
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("inspect_model", line)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_errors_in_a_cell_show_no_traceback(ip, capsys):
    result = ip.run_cell("%inspect_model modle")
    assert not result.success
    err = capsys.readouterr()
    text = err.out + err.err
    assert "UsageError: %inspect_model: model expression 'modle': name 'modle' is not defined" in text
    assert "Traceback" not in text


def _shown(ip, cell: str, store_history: bool) -> tuple[int, int]:
    """(displayed outputs, values IPython's displayhook printed) while running `cell` (a
    Result displays itself through ``_ipython_display_``: its showing as the cell's value is
    a display too)."""
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        result = ip.run_cell(cell, store_history=store_history)
    assert result.success, result.error_in_exec
    return len(cap.outputs), cap.stdout.count("<Inspection ")


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("%inspect_model nets[0]", (1, 0)),  # last expression: IPython shows the returned value
        ("shown = %inspect_model nets[0]", (1, 0)),  # assigned: the magic displays it itself
        ("%inspect_model nets[0]\nx = 1", (1, 0)),  # not last: displayed by the magic
        ("%inspect_model nets[0];", (1, 0)),  # IPython passes ';' into the magic and still shows Out
        ("%inspect_model nets[0] --text", (0, 0)),  # the printed text is the display
        ("kept_text = %inspect_model nets[0] --text", (0, 0)),
    ],
)
@pytest.mark.parametrize("store_history", [True, False], ids=["history", "no-history"])  # nbval: no history
def test_result_is_shown_exactly_once(ip, cell, expected, store_history):
    assert _shown(ip, cell, store_history) == expected


@pytest.mark.parametrize(
    "cell", ["%inspect_model nets[0] --compare other", "c = %inspect_model nets[0] --compare other"]
)
def test_compare_shows_one_widget(ip, cell):
    from IPython.utils.capture import capture_output

    ip.user_ns["other"] = examples.build("mlp", seed=1)
    with capture_output() as cap:
        assert ip.run_cell(cell, store_history=False).success
    widgets = [o for o in cap.outputs if "application/vnd.jupyter.widget-view+json" in o.data]
    assert len(widgets) == 1 and "<Inspection " not in cap.stdout
    assert widgets[0].data["text/plain"].startswith("<Comparison")


def test_compare_reads_the_model_and_its_statistics_once(ip, calls):
    from IPython.utils.capture import capture_output

    from nbinspect.analyze import stats as stats_module
    from nbinspect.backends import backend_named

    built = calls(backend_named("torch"), "source")  # the model read into a source
    read = calls(stats_module, "tensor_stats", lambda source: id(source.model))  # its weights
    shown = calls(nbinspect.Comparison, "_widget_frames", lambda c: c)
    ip.user_ns["other"] = examples.build("mlp", seed=1)
    with capture_output():
        assert ip.run_cell("c = %inspect_model nets[0] --compare other", store_history=False).success
    model, other = ip.user_ns["nets"][0], ip.user_ns["other"]
    assert sorted(built) == sorted(read) == sorted([id(model), id(other)])  # was: the model twice each
    frames = shown[0]._widget_frames()  # what the comparison's widget showed: before/after statistics
    assert frames["stats_a"] is ip.user_ns["c"].frames["stats"]  # the inspection's own frame, reused
    fresh = nbinspect.compare(examples.build("mlp"), examples.build("mlp", seed=1))._widget_frames()
    for side in ("stats_a", "stats_b"):  # the same numbers the comparison computed by itself
        pd.testing.assert_frame_equal(frames[side], fresh[side])


def test_compare_histograms_take_the_bins_option_on_both_sides(ip, calls):
    from IPython.utils.capture import capture_output

    shown = calls(nbinspect.Comparison, "_widget_frames", lambda c: c)
    ip.user_ns["other"] = examples.build("mlp", seed=1)
    with capture_output():
        insp = ip.run_line_magic("inspect_model", "nets[0] --compare other --bins 8")
    frames = shown[0]._widget_frames()
    for hists in (insp.stats["hist_counts"], frames["stats_a"]["hist_counts"], frames["stats_b"]["hist_counts"]):
        assert {len(c) for c in hists if c is not None} == {8}  # before and after line up bin for bin


def test_input_shape_and_dtype_trace_a_forward_pass(ip):
    ip.run_cell("lm = examples.build('tiny_lm')")
    insp = ip.run_line_magic("inspect_model", "lm --input-shape 2,16 --dtype int64 --text")
    direct = nbinspect.trace(examples.build("tiny_lm"), (2, 16), input_dtype=__import__("torch").int64)
    root = insp.layers.set_index("name").loc[""]
    assert list(root["output_shapes"]) == [(2, 16, 256)]
    assert root["flops"] == direct.layers.set_index("name").loc["", "flops"] > 0
    assert len(insp.flow) == len(direct.flow)


def test_input_expression_is_evaluated_in_scope(ip):
    ip.run_cell("import torch; batch = torch.randn(3, 32)")
    insp = ip.run_line_magic("inspect_model", "nets[0] --input batch --text")
    assert list(insp.layers.set_index("name").loc["head", "output_shapes"]) == [(3, 10)]


def test_stats_options(ip):
    insp = ip.run_line_magic("inspect_model", "nets[0] --bins 8 --text")
    assert {len(c) for c in insp.stats["hist_counts"] if c is not None} == {8}
    bare = ip.run_line_magic("inspect_model", "nets[0] --no-stats --text")
    with pytest.raises(ValueError, match="without weight statistics"):
        bare.stats


def test_memory_plan_option_prints_the_plan(ip, capsys):
    ip.run_line_magic("inspect_model", "nets[0] --input-shape 4,32 --batch-size 4 --optimizer sgd --text")
    out = capsys.readouterr().out
    plan = nbinspect.memory(examples.build("mlp"), input=(4, 32), batch_size=4, optimizer="sgd")
    assert str(plan) in out


def test_compare_option_prints_the_comparison(ip, capsys):
    ip.run_cell("other = examples.build('mlp', seed=1)")
    ip.run_line_magic("inspect_model", "nets[0] --compare other --text")
    out = capsys.readouterr().out
    assert str(nbinspect.compare(examples.build("mlp"), examples.build("mlp", seed=1))) in out


def test_html_option_writes_a_standalone_page(ip, tmp_path):
    path = tmp_path / "m.html"
    ip.run_line_magic("inspect_model", f"nets[0] --text --html {path}")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") or page.lower().startswith("<!doctype html>")
    assert "Sequential" in page and "<script" in page


def test_failing_forward_names_the_module_in_one_line(ip):
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("inspect_model", "nets[0] --input-shape 4,31 --text")
    message = str(info.value)
    assert "\n" not in message and "body.0" in message and "[4, 31]" in message


def test_cell_magic_traces_the_cells_own_forward_passes(ip):
    ip.run_cell("import torch; x3 = torch.randn(3, 32); x5 = torch.randn(5, 32); cellnet = examples.build('mlp')")
    insp = ip.run_cell_magic(
        "inspect_model", "cellnet --text", "a = cellnet(x3)\nb = cellnet(x5)\nshape_b = tuple(b.shape)"
    )
    assert insp is None  # --text printed instead
    result = ip.run_cell_magic("inspect_model", "cellnet -o watched", "cellnet(x3); out = cellnet(x5)")
    assert result is ip.user_ns["watched"]
    layers = result.layers.set_index("name")
    assert layers.loc["", "calls"] == 2 and layers.loc["head", "calls"] == 2
    assert list(layers.loc["head", "output_shapes"]) == [(3, 10)]  # first call
    assert (result.flow["name"] == "head").sum() == 2
    # FLOPs of both passes: the same as tracing each input alone
    one = nbinspect.trace(examples.build("mlp"), (3, 32)).layers.set_index("name").loc["", "flops"]
    two = nbinspect.trace(examples.build("mlp"), (5, 32)).layers.set_index("name").loc["", "flops"]
    assert layers.loc["", "flops"] == one + two
    assert ip.user_ns["out"].shape == (5, 10)  # the cell really ran, in the user's namespace


def test_cell_magic_leaves_no_hooks_and_keeps_the_cells_effects(ip):
    ip.run_cell("import torch; tnet = examples.build('mlp'); opt = torch.optim.SGD(tnet.parameters(), lr=0.1)")
    before = ip.user_ns["tnet"].head.weight.detach().clone()
    cell = "loss = tnet(torch.randn(4, 32)).pow(2).mean()\nloss.backward()\nopt.step()"
    insp = ip.run_cell_magic("inspect_model", "tnet", cell)
    model = ip.user_ns["tnet"]
    assert not torch_equal(before, model.head.weight)  # the training step is the user's: kept
    assert no_hooks_left(model)
    assert insp.layers.set_index("name").loc["", "activation_bytes"] > 0


def torch_equal(a, b) -> bool:
    import torch

    return torch.equal(a, b)


def no_hooks_left(model) -> bool:
    """Neither the per-module hooks nor the global ones the recorder registers."""
    from torch.nn.modules import module as torch_module

    global_hooks = (torch_module._global_forward_hooks, torch_module._global_forward_pre_hooks)
    return not any(global_hooks) and all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_cell_magic_errors(ip):
    ip.run_cell("import torch; x3 = torch.randn(3, 32); cellnet = examples.build('mlp')")  # its own: any order
    with pytest.raises(UsageError, match="never called cellnet"):
        ip.run_cell_magic("inspect_model", "cellnet", "y = 1")
    with pytest.raises(UsageError, match="--input-shape does not apply"):
        ip.run_cell_magic("inspect_model", "cellnet --input-shape 2,32", "cellnet(x3)")
    assert ip.run_cell_magic("inspect_model", "cellnet", "raise ValueError('in the cell')") is None
    assert no_hooks_left(ip.user_ns["cellnet"])


def test_a_dtype_hint_names_the_magics_own_option(ip):
    ip.user_ns["lm"] = examples.build("tiny_lm")
    with pytest.raises(UsageError, match=r"add --input-dtype int64 for token ids") as info:
        ip.run_line_magic("inspect_model", "lm --input-shape 2,8 --text")
    assert "input_dtype" not in str(info.value)
