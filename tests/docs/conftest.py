"""Shared by the seed-document tests: one snippet runner (one preloaded server process) and
seed 002's GENESIS project, built once per session."""

from __future__ import annotations

import pytest

from . import harness


@pytest.fixture(scope="session")
def snippet_runner(tmp_path_factory):
    runner = harness.Runner(tmp_path_factory.mktemp("seed-snippets"))
    yield runner
    runner.close()


@pytest.fixture(scope="session")
def genesis_env(snippet_runner):
    """Extra environment of seed 002's snippets: the GENESIS template their blocks copy."""
    return {"GENESIS_TEMPLATE": str(harness.genesis_template(snippet_runner.work, snippet_runner))}


@pytest.fixture
def snippet_env():
    return {}


def run_snippet(path, runner: harness.Runner, env: dict) -> harness.Result:
    """Run one snippet; skip it if it says so (exit 77) or runs the project's own tests."""
    if harness.header(path).repo_test:
        pytest.skip("runs the original project's own test files; their nbinspect equivalents run in the suite")
    result = runner.run(path, env)
    if result.skipped:
        reason = next((ln for ln in (result.out + result.err).splitlines() if ln.startswith("SKIP")), "skipped")
        pytest.skip(reason)
    return result
