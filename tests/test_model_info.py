"""dump_model_info: the print-style report and its numbers."""

from __future__ import annotations

import logging

import nbinspect
from nbinspect import examples


def test_numbers_match_totals(zoo_name):
    model = examples.build(zoo_name)
    info = nbinspect.dump_model_info(model, logger=logging.getLogger("quiet"))
    t = nbinspect.totals(model)
    assert (info.total_params, info.trainable_params, info.non_trainable_params) == (
        t["total_params"],
        t["trainable_params"],
        t["non_trainable_params"],
    )
    assert info.total_memory_mb == (t["param_bytes"] + t["buffer_bytes"]) / 2**20
    leaves = [n for n, m in model.named_modules() if n and not list(m.children())]
    assert [layer["name"] for layer in info.layers] == leaves
    assert info.num_layers == len(leaves) and info.errors == []


def test_writes_sections_through_logger(caplog):
    with caplog.at_level(logging.INFO, logger="report"):
        nbinspect.dump_model_info(examples.build("frozen"), logger=logging.getLogger("report"))
    text = caplog.text
    assert "SUMMARY" in text and "LAYER DETAILS" in text
    assert "Total parameters: 708" in text
    assert "backbone.0 (Linear): 544 params, frozen; weight [32, 16], bias [32]" in text


def test_prints_without_logger(capsys):
    nbinspect.dump_model_info(examples.build("mlp"))
    out = capsys.readouterr().out
    assert "SUMMARY" in out and "Total parameters: 6,922" in out


def test_odd_input_is_logged_not_raised(caplog):
    with caplog.at_level(logging.ERROR, logger="report"):
        info = nbinspect.dump_model_info("not a model", logger=logging.getLogger("report"))
    assert info.total_params == 0 and len(info.errors) == 1
    assert "could not inspect str" in caplog.text
