"""Folders written by torch.distributed.checkpoint (DCP) as sources."""

from __future__ import annotations

import collections
import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import CheckpointError, UnsafeCheckpointError


def _save(state: dict, folder) -> None:
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "assuming ... a single process"
        dcp.save(state, checkpoint_id=str(folder))


@pytest.fixture
def model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 9), nn.LayerNorm(9), nn.Linear(9, 8000))  # 72,000: a large tensor


def test_a_dcp_folder_reads_like_the_model_it_holds(model, tmp_path):
    _save({"model": model.state_dict(), "step": 7, "config": {"lr": 0.1}}, tmp_path)
    source = nbinspect.load_checkpoint(tmp_path)
    assert source.metadata["format"] == "torch.distributed.checkpoint (1 .distcp files)"
    assert source.metadata["non-tensor entries"] == "step, config.lr"
    params = nbinspect.params(tmp_path).set_index("name")
    reference = nbinspect.params(model).set_index("name")
    for name, row in reference.iterrows():
        assert params.loc[f"model.{name}", "shape"] == row["shape"]
        assert params.loc[f"model.{name}", "dtype"] == row["dtype"]
    stats = nbinspect.stats(tmp_path).set_index("name")
    expected = nbinspect.stats(model).set_index("name")
    columns = ["numel", "mean", "std", "min", "max", "l2", "zeros", "nan", "inf"]
    got = stats.loc[[f"model.{n}" for n in expected.index], columns].set_axis(expected.index)
    pd.testing.assert_frame_equal(got.astype(float), expected[columns].astype(float), rtol=0, atol=0)
    for name in expected.index:
        np.testing.assert_array_equal(stats.loc[f"model.{name}", "hist_counts"], expected.loc[name, "hist_counts"])


def test_compare_a_dcp_folder_with_the_live_model(model, tmp_path):
    _save(model.state_dict(), tmp_path)
    frame = nbinspect.compare(tmp_path, model).frame
    assert set(frame["status"]) == {"same"}
    with torch.no_grad():
        model[0].bias.add_(1.0)
    frame = nbinspect.compare(tmp_path, model).frame.set_index("name")
    assert frame.loc["0.bias", "status"] == "changed"
    assert frame.loc["0.bias", "l2_delta"] == pytest.approx(3.0, rel=1e-7)  # sqrt(9 elements * 1^2)


def test_metadata_that_needs_other_classes_is_refused(tmp_path):
    (tmp_path / ".metadata").write_bytes(pickle.dumps(collections.Counter(a=1)))
    with pytest.raises(
        UnsafeCheckpointError, match=r"\.metadata: refused to unpickle: the file needs collections\.Counter"
    ):
        nbinspect.load_checkpoint(tmp_path)
    with pytest.raises(CheckpointError, match="not DCP metadata"):
        nbinspect.load_checkpoint(tmp_path, trust=True)


def test_one_element_tensors_are_read(tmp_path):
    import torch.distributed.checkpoint as dcp

    dcp.save({"a": torch.tensor([3.5]), "b": torch.arange(6.0).view(2, 3)}, checkpoint_id=str(tmp_path), no_dist=True)
    source = nbinspect.load_checkpoint(tmp_path)
    values = {t.name: t.values() for t in source.tensors}
    assert torch.equal(values["a"], torch.tensor([3.5])) and torch.equal(values["b"], torch.arange(6.0).view(2, 3))
