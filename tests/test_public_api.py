"""The public API is exactly what __all__ says, and every name in it exists."""

import nbinspect

EXPECTED = {
    "CheckpointError",
    "EngineError",
    "HealthThresholds",
    "health",
    "Comparison",
    "UnsafeCheckpointError",
    "compare",
    "distributed",
    "load_checkpoint",
    "Inspection",
    "InspectWidget",
    "MixtureOfExperts",
    "ModelInfo",
    "build_on_meta",
    "expert_changes",
    "moe",
    "split_experts",
    "by_type",
    "from_config",
    "dump_model_info",
    "examples",
    "inspect",
    "json_schema",
    "layers",
    "load_ipython_extension",
    "locate",
    "memory",
    "mlx",
    "params",
    "plot_distributions",
    "stats",
    "totals",
    "trace",
    "TraceError",
    "track",
    "trust_project",
    "value_grid",
}


def test_all_is_the_public_api():
    assert set(nbinspect.__all__) == EXPECTED
    assert len(nbinspect.__all__) == len(set(nbinspect.__all__))


def test_every_public_name_resolves():
    for name in nbinspect.__all__:
        assert getattr(nbinspect, name) is not None, name


def test_no_stray_public_names():
    """Names without a leading underscore at package level are either exported or submodules."""
    import types

    stray = {
        n
        for n, v in vars(nbinspect).items()
        if not n.startswith("_") and n not in EXPECTED and not isinstance(v, types.ModuleType) and n != "annotations"
    }
    assert not stray, f"public names missing from __all__: {sorted(stray)}"
