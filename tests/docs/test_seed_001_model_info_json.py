"""Seed 001 (the enhanced `model_info.json`): every JSON record of the document is compared
with what `Inspection.to_model_info()` writes for the same module (key sets exactly for leaf
records, values where the document's arithmetic is right), plus the root-owned-parameter,
MLX and vLLM points of issue 26. The counts are tested against torch in
tests/render/test_model_info_json.py (the document's 432 and 64 are 448 and 32 there)."""

from __future__ import annotations

import pytest

from . import harness
from .conftest import run_snippet

SNIPPETS = harness.snippets("001")
BLOCKS = [p for p in SNIPPETS if harness.header(p).doc]


@pytest.mark.parametrize("path", BLOCKS, ids=lambda p: p.stem)
def test_block_is_the_document_block(path):
    assert harness.as_written(path) is None


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.stem)
def test_block_runs_as_written(path, snippet_runner, snippet_env):
    result = run_snippet(path, snippet_runner, snippet_env)
    assert result.rc == 0 and not result.missed(), result.explain()
