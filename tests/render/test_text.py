"""The text summary: golden output for every zoo model, and the number formatting it uses."""

from __future__ import annotations

import subprocess
import sys

import nbinspect
from nbinspect import examples
from nbinspect.render.format import trainable_status


def test_summary_golden(zoo_name, golden):
    golden(f"summary_{zoo_name}.txt", str(nbinspect.inspect(examples.build(zoo_name))) + "\n")


def test_summary_depth_control(golden):
    insp = nbinspect.inspect(examples.build("tiny_lm"))
    shallow = insp.summary(depth=1)
    golden("summary_tiny_lm_depth1.txt", shallow + "\n")
    assert "ln_1" not in shallow and "blocks" in shallow
    full = insp.summary(depth=None)
    assert "qkv" in full and "all levels" in full
    assert full.count("\n") > insp.summary().count("\n") > shallow.count("\n")


def test_demo_command_prints_the_summary():
    out = subprocess.run(
        [sys.executable, "-m", "nbinspect", "demo", "--model", "mlp"], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == nbinspect.inspect(examples.build("mlp")).summary(depth=3)


def test_trainable_status():
    assert [trainable_status(*a) for a in [(1, 0), (0, 1), (1, 1), (0, 0)]] == ["trainable", "frozen", "partial", ""]
