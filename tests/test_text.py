"""The text summary: golden output for every zoo model, and the number formatting it uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

import nbinspect
from nbinspect import examples
from nbinspect.render.format import format_bytes, format_count, format_shape, trainable_status


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


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KB"),
        (1536, "1.5 KB"),
        (5 * 2**20, "5.0 MB"),
        (3 * 2**30, "3.0 GB"),
        (2**41, "2.0 TB"),
    ],
)
def test_format_bytes(n, text):
    assert format_bytes(n) == text


def test_format_helpers():
    assert format_count(1234567) == "1,234,567" and format_count(None) == ""
    assert format_shape((2, 16, 64)) == "[2, 16, 64]"
    assert format_shape([(2, 3), (4,)]) == "[2, 3] [4]"
    assert [trainable_status(*a) for a in [(1, 0), (0, 1), (1, 1), (0, 0)]] == ["trainable", "frozen", "partial", ""]
