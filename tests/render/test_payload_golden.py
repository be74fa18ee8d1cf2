"""The widget payload and the JSON export, byte for byte: small golden files
(``tests/golden/payload_*.json``, ``export_*.json``) written by the code before the payload
was made faster, so no speed-up can change what a user sees (``pytest --update-golden``
rewrites them).

Every case is exact on any CPU: weights are multiples of 1/16 and inputs small multiples of
1/4, so every sum, moment and histogram bin is exact in float32 and float64 alike, whatever
the order of summation. The cases cover each path the payload takes: no statistics; traced
with statistics and module roll-ups; tied weights; NaN, infinite, all-zero and constant
tensors (health); 3-D and 4-D weight matrices, a BatchNorm's integer buffer and an
uninitialized lazy parameter (a note); a comparison (changed, same and added tensors, each
side's histograms); and hand-edited frames with what the fast paths must treat as before
(lists for arrays, uneven histogram edges, NaN and infinite statistics, a duplicated name,
missing and object-typed columns, a timeline)."""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.analyze.views import view_data
from nbinspect.core.moments import histogram_edges
from nbinspect.inspection import with_memory
from nbinspect.render.payload import build_payload, histogram, timeline

from ..generate_contract import dump


def _built(name, framework, totals, frames, sides=None, timeline=None):
    """The payload as a result builds it: the views decided from the frames, then rendered."""
    return build_payload(name, framework, totals, frames, sides, timeline, views=view_data(frames))


def _exact(model: nn.Module) -> nn.Module:
    """Weights rounded to multiples of 1/16 (exact sums in any order)."""
    with torch.no_grad():
        for p in model.parameters():
            if not isinstance(p, nn.parameter.UninitializedParameter):
                p.copy_(torch.round(p * 16) / 16)
    return model


def _blocks(n: int = 3) -> nn.Module:
    torch.manual_seed(0)
    return _exact(nn.Sequential(*(nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(n)), nn.LayerNorm(4)))


_X = torch.arange(8.0).reshape(2, 4) / 4


class _TiedLM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.body = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4))
        self.head = nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(ids)))


class _Experts(nn.Module):
    """Fused expert weights: one 3-D parameter."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 4, 4))


class _Shapes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3)
        self.experts = _Experts()
        self.norm = nn.BatchNorm1d(4)
        self.lazy = nn.LazyLinear(2)
        self.register_buffer("steps", torch.arange(6, dtype=torch.int64))


def _health_model() -> nn.Module:
    model = _blocks(4)
    with torch.no_grad():
        model[0][0].weight[0, 0] = float("nan")
        model[1][0].weight[1, 2] = float("inf")
        model[2][0].weight.zero_()
        model[3][0].bias.fill_(0.5)
    return model


def _compared() -> nbinspect.Comparison:
    a = _blocks()
    torch.manual_seed(1)
    b = _blocks()
    b.load_state_dict(a.state_dict())
    with torch.no_grad():
        b[0][0].weight[:2] += 0.25
        b[2][0].bias.mul_(2)
    b.register_buffer("extra", torch.ones(3))
    return nbinspect.compare(a, b)


def _odd_frames() -> dict[str, pd.DataFrame]:
    """A traced inspection's frames, edited: the forms frames from other sources may take."""
    frames = {k: v.copy() for k, v in nbinspect.inspect(_blocks(4), input=_X)._widget_frames().items()}
    stats = frames["stats"]
    counts, edges = stats.at[0, "hist_counts"], stats.at[0, "hist_edges"]
    stats.at[0, "hist_counts"] = (counts[::2] + counts[1::2]).tolist()  # half the bins, as lists
    stats.at[0, "hist_edges"] = edges[::2].tolist()
    for row in (1, 4):  # uneven edges: sent in full, and no part of a module's matrices
        edges = stats.at[row, "hist_edges"].copy()
        edges[1:-1] += np.linspace(0.0, 0.01, edges.size - 2)
        stats.at[row, "hist_edges"] = edges
    stats.at[2, "hist_edges"] = np.array([0.0, 1.0])  # counts and edges that do not match: no histogram
    stats.at[6, "hist_edges"] = histogram_edges(0.1, 1 / 3, 64)  # edges that rounding shortens
    for row, shift in ((5, 3e-6), (7, 2e-7)):  # merged widths apart by twice `shift`: past 1e-6 (sent in full), within
        edges = histogram_edges(0.0, 1.0, 64)
        edges[4] += shift / 16
        stats.at[row, "hist_edges"] = edges
    stats.loc[3, ["mean", "max"]] = [float("nan"), float("inf")]
    stats.loc[4, "note"] = "a note"
    stats = pd.concat([stats, stats.iloc[[5]].assign(mean=0.125)], ignore_index=True)  # a name twice: the last wins
    frames["stats"] = stats
    modules = frames["stats_by_module"].drop(columns=["l2", "hist_counts", "hist_edges"])
    modules["zeros"] = modules["zeros"].astype(object)  # numbers in an object column
    frames["stats_by_module"] = modules
    return frames


def _inspections() -> dict[str, Callable[[], nbinspect.Inspection]]:
    torch.manual_seed(2)
    return {
        "plain": lambda: nbinspect.inspect(examples.build("mlp"), stats=False),
        "traced": lambda: nbinspect.inspect(_blocks(), input=_X),
        "tied": lambda: nbinspect.inspect(_exact(_TiedLM()), input=torch.tensor([[1, 2, 3]])),
        "health": lambda: nbinspect.inspect(_health_model()),
        "shapes": lambda: nbinspect.inspect(_exact(_Shapes())),
        "memory": lambda: with_memory(nbinspect.inspect(_blocks(), stats=False), nbinspect.memory(_blocks(), input=_X)),
    }


def _export_text(document: dict) -> str:
    """JSON with one line per field and per row of a table, so a diff shows which row changed."""
    lines = []
    for key, value in document.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            rows = ",\n".join(f"  {json.dumps(v)}" for v in value)
            lines.append(f" {json.dumps(key)}: [\n{rows}\n ]")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _payload(result) -> dict:
    return result._payload()


@pytest.mark.parametrize("case", list(_inspections()))
def test_inspection_payload_and_export_are_unchanged(case, golden):
    torch.manual_seed(3)
    insp = _inspections()[case]()
    golden(f"payload_{case}.json", dump(_payload(insp)))
    golden(f"export_{case}.json", _export_text(insp.to_dict()))


def test_comparison_payload_and_export_are_unchanged(golden):
    cmp = _compared()
    golden("payload_compare.json", dump(_payload(cmp)))
    golden("export_compare.json", _export_text(cmp.to_dict()))


def test_edited_frames_payload_is_unchanged(golden):
    frames = _odd_frames()
    history = pd.DataFrame({"step": [0, 1, 2], "loss": [1.5, float("nan"), 0.25], "lr": [0.1, 0.1, float("inf")]})
    payload = _built("Edited", "torch", {"total_params": 1}, frames, timeline=timeline(history, ["loss", "lr"]))
    golden("payload_edited.json", dump(payload))
    full = {
        name: histogram(view_data(frames), name, kind) for name, kind in (("0.0.weight", "tensor"), ("0", "module"))
    }
    golden("histograms_edited.json", json.dumps(full) + "\n")


def test_module_rows_in_the_stats_frame_payload_is_unchanged(golden):
    frames = dict(nbinspect.inspect(_blocks(), input=_X)._widget_frames())
    frames["stats"] = pd.concat([frames["stats"], frames.pop("stats_by_module")], ignore_index=True)
    golden("payload_merged.json", dump(_built("Merged", "torch", {}, frames)))


def test_comparison_histograms_on_a_tie_keep_the_first_side(golden):
    """The two sides' ranges end at -0.0 and 0.0, which compare equal: a's is kept."""
    cmp = _compared()
    frames = {k: v.copy() for k, v in cmp._widget_frames().items()}
    for key, hi in (("stats_a", -0.0), ("stats_b", 0.0)):
        side = frames[key]
        side.at[side.index[side["name"] == "0.0.weight"][0], "hist_edges"] = histogram_edges(-1 / 3, hi, 64)
    golden("payload_compare_tie.json", dump(_built("Tie", "torch", {}, frames, ("a", "b"))))
