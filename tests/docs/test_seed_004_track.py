"""Seed 004 (the training-dynamics framework, ``grail.trainer.analysis`` → ``nbinspect.track``):
every code block of the document runs as written (only the import path changed) and shows
the documented keys; the extra snippets check issue 26's points no block exercises
(immutable snapshots, SiLU activations, a wrong ``inputs``, the key names). The numbers
behind them are tested against float64 references in tests/track/test_track.py."""

from __future__ import annotations

import dataclasses

import pytest

from . import harness
from .conftest import run_snippet

SNIPPETS = harness.snippets("004")
BLOCKS = [p for p in SNIPPETS if harness.header(p).doc]


@pytest.mark.parametrize("path", BLOCKS, ids=lambda p: p.stem)
def test_block_is_the_document_block(path):
    assert harness.as_written(path) is None


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.stem)
def test_block_runs_as_written(path, snippet_runner, snippet_env):
    result = run_snippet(path, snippet_runner, snippet_env)
    assert result.rc == 0 and not result.missed(), result.explain()


def test_document_is_wrong_here():
    """The document's AnalysisConfig gives a dataclass a list default, which Python refuses;
    nbinspect keeps tuples and accepts lists. The document's "3 forward passes" for sparse
    quality is 7 with the random baseline (1 full + 3 masked + 3 random)."""
    with pytest.raises(ValueError, match="mutable default"):

        @dataclasses.dataclass
        class Documented:
            param_change_thresholds: list = [1e-8, 1e-6, 1e-4]  # noqa: RUF008  (the document, as written)

    from nbinspect.track import AnalysisConfig, SparseQualityMetrics

    assert AnalysisConfig(param_change_thresholds=[1e-8, 1e-6, 1e-4]).param_change_thresholds == (1e-8, 1e-6, 1e-4)
    assert "7 for 3 thresholds" in (SparseQualityMetrics.__doc__ or "")
