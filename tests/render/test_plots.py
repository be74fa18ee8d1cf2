"""Distribution plots: PNGs that decode, paging for big models, clear errors, no matplotlib."""

from __future__ import annotations

import logging
import sys

import matplotlib.image
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from tests.conftest import assert_unchanged, model_state


def read_png(path) -> tuple[int, int]:
    assert path.stat().st_size > 0
    image = matplotlib.image.imread(path)  # decodes, or raises
    return image.shape[0], image.shape[1]


def visible_panels(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible()]


def test_png_is_written_and_decodes(tmp_path):
    model = examples.build("tiny_lm")
    before = model_state(model)
    path = tmp_path / "dist.png"
    fig = nbinspect.plot_distributions(model, path)
    assert_unchanged(before, model_state(model))
    height, width = read_png(path)
    assert (width, height) == tuple(int(v) for v in fig.get_size_inches() * 100)
    panel = visible_panels(fig)[0]
    assert panel.get_title(loc="left") == "tok_emb.weight"
    assert "mean" in panel.texts[0].get_text() and "std" in panel.texts[0].get_text()


def test_three_hundred_layers_are_paged_not_walled(tmp_path):
    model = nn.Sequential(*[nn.Linear(4, 4, bias=False) for _ in range(300)])
    frame = nbinspect.stats(model)
    fig = nbinspect.plot_distributions(frame)
    assert len(visible_panels(fig)) == 16
    assert "1–16 of 300" in fig._suptitle.get_text() and "page 1 of 19" in fig._suptitle.get_text()
    last = nbinspect.plot_distributions(frame, page=19, path=tmp_path / "last.png")
    assert len(visible_panels(last)) == 300 - 18 * 16
    read_png(tmp_path / "last.png")
    with pytest.raises(ValueError, match="page=20: there are 19 page"):
        nbinspect.plot_distributions(frame, page=20)


def test_pattern_and_top_choose_the_panels():
    frame = nbinspect.stats(examples.build("tiny_lm"))
    fig = nbinspect.plot_distributions(frame, pattern=r"mlp\.0\.weight$")
    assert [ax.get_title(loc="left") for ax in visible_panels(fig)] == [
        "blocks.0.mlp.0.weight",
        "blocks.1.mlp.0.weight",
    ]
    top = nbinspect.plot_distributions(frame, top=1)
    assert [ax.get_title(loc="left") for ax in visible_panels(top)] == ["tok_emb.weight"]
    with pytest.raises(ValueError, match="no rows to plot"):
        nbinspect.plot_distributions(frame, pattern="nothing-like-this")


def test_buffers_module_rows_and_rows_without_values():
    cnn = examples.build("cnn")
    plain = nbinspect.plot_distributions(cnn, per_page=100)
    assert not any("running" in ax.get_title(loc="left") for ax in visible_panels(plain))
    with_buffers = nbinspect.plot_distributions(cnn, buffers=True, per_page=100)
    assert any("running_var" in ax.get_title(loc="left") for ax in visible_panels(with_buffers))
    modules = nbinspect.plot_distributions(nbinspect.stats(cnn, by="module"), pattern="^features")
    assert visible_panels(modules)[0].get_title(loc="left") == "features"
    meta = nbinspect.plot_distributions({"w": torch.empty(3, 3, device="meta")})
    assert "meta tensor" in visible_panels(meta)[0].texts[0].get_text()


def test_a_frame_that_is_not_stats_is_refused():
    with pytest.raises(ValueError, match="stats frame columns"):
        nbinspect.plot_distributions(nbinspect.params(examples.build("mlp")))


def test_missing_matplotlib_is_a_clear_error_and_a_logged_warning(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        nbinspect.plot_distributions(examples.build("mlp"))
    lines = []
    logger = logging.getLogger("nbinspect-test-report")
    logger.addHandler(handler := logging.Handler())
    handler.emit = lambda record: lines.append(record.getMessage())
    logger.setLevel(logging.INFO)
    try:
        info = nbinspect.dump_model_info(examples.build("mlp"), logger=logger, plot_distributions=True)
    finally:
        logger.removeHandler(handler)
    assert "WEIGHT STATISTICS" in "\n".join(lines)
    assert any("matplotlib" in line for line in lines) and info.figure is None
    assert info.errors == [
        "Matplotlib not available: distribution plot skipped "
        "(plot_distributions needs matplotlib: pip install matplotlib)"
    ]


def test_dump_model_info_adds_weight_statistics_and_saves_the_plot(tmp_path, capsys):
    path = tmp_path / "mlp.png"
    info = nbinspect.dump_model_info(examples.build("mlp"), plot_distributions=True, save_path=str(path))
    out = capsys.readouterr().out
    assert "WEIGHT STATISTICS" in out and f"saved to {path}" in out
    assert [s["name"] for s in info.weight_stats] == [n for n, _ in examples.build("mlp").named_parameters()]
    read_png(path)
    assert not info.errors
    plain = nbinspect.dump_model_info(examples.build("mlp"), plot_distributions=False)
    out = capsys.readouterr().out  # statistics always; the plot only when asked (the default)
    assert "WEIGHT STATISTICS" in out and "saved to" not in out and plain.figure is None


def test_dump_model_info_logs_an_unwritable_path(tmp_path):
    info = nbinspect.dump_model_info(
        examples.build("mlp"),
        logger=logging.getLogger("quiet"),
        plot_distributions=True,
        save_path=str(tmp_path / "no" / "dir.png"),
    )
    assert info.errors and info.errors[0].startswith("distribution plot failed: FileNotFoundError")


def test_statistics_never_cover_the_bars():
    """Issue 26: the mean/std/min/max box sat inside the axes and covered a uniform
    initialisation's bars; it is now one line above the panel."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 256))
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = nbinspect.plot_distributions(model)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.patches]
    assert panels
    for ax in panels:
        box = ax.get_window_extent(renderer)
        stats = [t for t in ax.texts if "std" in t.get_text()]
        assert len(stats) == 1
        extent = stats[0].get_window_extent(renderer)
        assert extent.y0 >= box.y1 - 0.5  # above the data area
        assert not any(extent.overlaps(p.get_window_extent(renderer)) for p in ax.patches)
