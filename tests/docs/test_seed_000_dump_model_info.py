"""Seed 000 (the `dump_model_info` utility, `src.utils.model_info` → `nbinspect`): every code
block of the document runs as written (only the import path changed, placeholders filled)
and shows the documented SUMMARY / LAYER DETAILS / WEIGHT STATISTICS structure and the
LayerInfo attributes its examples use. The numbers are tested in tests/test_model_info.py
(including where the document's own arithmetic is wrong: test_document_000_arithmetic)."""

from __future__ import annotations

import pytest

from . import harness
from .conftest import run_snippet

SNIPPETS = harness.snippets("000")
BLOCKS = [p for p in SNIPPETS if harness.header(p).doc]


@pytest.mark.parametrize("path", BLOCKS, ids=lambda p: p.stem)
def test_block_is_the_document_block(path):
    assert harness.as_written(path) is None


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.stem)
def test_block_runs_as_written(path, snippet_runner, snippet_env):
    result = run_snippet(path, snippet_runner, snippet_env)
    assert result.rc == 0 and not result.missed(), result.explain()
