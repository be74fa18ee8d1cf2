"""Statistics of a sharded safetensors checkpoint with `workers=` threads: the same frame."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import nbinspect


@pytest.fixture
def sharded(tmp_path):
    from safetensors.torch import save_file

    torch.manual_seed(0)
    shards = {
        "model-00001-of-00003.safetensors": {"embed.weight": torch.randn(300, 400), "norm.weight": torch.ones(400)},
        "model-00002-of-00003.safetensors": {
            "layers.0.w": torch.randn(256, 300).bfloat16(),
            "layers.0.b": torch.zeros(256),
        },
        "model-00003-of-00003.safetensors": {"layers.1.w": torch.randn(500, 200) * 3 + 1, "steps": torch.arange(5)},
    }
    weight_map = {}
    for file, tensors in shards.items():
        save_file(tensors, tmp_path / file)
        weight_map.update(dict.fromkeys(tensors, file))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return tmp_path


def test_workers_give_the_same_frame_as_one_process(sharded):
    one = nbinspect.stats(sharded)
    two = nbinspect.stats(sharded, workers=2)
    pd.testing.assert_frame_equal(
        two.drop(columns=["hist_counts", "hist_edges"]), one.drop(columns=["hist_counts", "hist_edges"])
    )
    for a, b in zip(one["hist_counts"], two["hist_counts"]):
        assert a.tolist() == b.tolist()
    assert set(one["name"]) == {"embed.weight", "norm.weight", "layers.0.w", "layers.0.b", "layers.1.w", "steps"}
    modules = nbinspect.stats(sharded, by="module", workers=2)
    pd.testing.assert_frame_equal(
        modules.drop(columns=["hist_counts", "hist_edges"]),
        nbinspect.stats(sharded, by="module").drop(columns=["hist_counts", "hist_edges"]),
    )


def test_a_bad_worker_count_is_one_clear_error(sharded):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"stats\(workers=.*\): need a positive number of workers"):
            nbinspect.stats(sharded, workers=bad)
