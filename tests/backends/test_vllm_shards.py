"""Tensor-parallel statistics merged from each rank's share. Runs without vLLM: modules
shaped and named like vLLM's parallel layers hold the shards two ranks would hold, and the
merged frames are checked against a float64 reference of the unsplit tensors."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from nbinspect.analyze.stats import frames_of, tensor_stats
from nbinspect.backends.torch.source import from_module
from nbinspect.backends.vllm.shards import (
    from_plain,
    global_moments,
    rank_histograms,
    rank_source,
    to_plain,
)

TP, HIDDEN, HEAD, HEADS, KV_HEADS, INTER, VOCAB, PADDED = 2, 8, 4, 4, 1, 6, 10, 16
BINS = 8


def rank_moments(source, bins):
    """Round one as a worker answers it (pipeline.worker_report's "moments" step)."""
    by_key = tensor_stats(source, bins, progress=False)
    return {t.name: by_key[t.storage_key] for t in source.tensors}


class QKVParallelLinear(nn.Module):
    def __init__(self, rank: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        super().__init__()
        self.tp_size, self.tp_rank, self.head_size = TP, rank, HEAD
        self.total_num_heads, self.total_num_kv_heads = HEADS, KV_HEADS
        self.num_heads, self.num_kv_head_replicas = HEADS // TP, TP // KV_HEADS
        rows = HEADS // TP * HEAD
        kv = rank // self.num_kv_head_replicas  # the kv head this rank holds, as vLLM loads it
        self.weight = nn.Parameter(torch.cat([q[rank * rows : (rank + 1) * rows], k[kv * HEAD : (kv + 1) * HEAD], v]))


class ColumnParallelLinear(nn.Module):
    pass


class MergedColumnParallelLinear(ColumnParallelLinear):
    def __init__(self, rank: int, gate: torch.Tensor, up: torch.Tensor):
        super().__init__()
        self.tp_size, self.tp_rank, self.output_size = TP, rank, 2 * INTER
        rows = INTER // TP
        self.weight = nn.Parameter(
            torch.cat([gate[rank * rows : (rank + 1) * rows], up[rank * rows : (rank + 1) * rows]])
        )


class RowParallelLinear(nn.Module):
    def __init__(self, rank: int, down: torch.Tensor, bias: torch.Tensor):
        super().__init__()
        self.tp_size, self.tp_rank, self.input_size = TP, rank, INTER
        cols = INTER // TP
        self.weight = nn.Parameter(down[:, rank * cols : (rank + 1) * cols].clone())
        self.bias = nn.Parameter(bias.clone())  # whole on every rank


class VocabParallelEmbedding(nn.Module):
    def __init__(self, rank: int, table: torch.Tensor):
        super().__init__()
        per = PADDED // TP
        start, end = rank * per, min((rank + 1) * per, VOCAB)
        self.tp_size, self.num_embeddings = TP, VOCAB
        self.shard_indices = SimpleNamespace(
            num_org_elements=end - start, num_org_elements_padded=per, num_added_elements=0
        )
        padding = torch.full((per - (end - start), HIDDEN), 99.0)  # not the model's: must not count
        self.weight = nn.Parameter(torch.cat([table[start:end], padding]))


class RMSNorm(nn.Module):
    def __init__(self, weight: torch.Tensor):
        super().__init__()
        self.weight = nn.Parameter(weight.clone())


@pytest.fixture(scope="module")
def full() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g)

    return {
        "embed.weight": rand(VOCAB, HIDDEN),
        "q": rand(HEADS * HEAD, HIDDEN),
        "k": rand(KV_HEADS * HEAD, HIDDEN),
        "v": rand(KV_HEADS * HEAD, HIDDEN) + 3,  # off-centre: a merge that drops v shows in the mean
        "gate": rand(INTER, HIDDEN),
        "up": rand(INTER, HIDDEN),
        "down_proj.weight": rand(HIDDEN, INTER),
        "down_proj.bias": rand(HIDDEN),
        "norm.weight": rand(HIDDEN),
    }


def _rank_model(rank: int, w: dict[str, torch.Tensor]) -> nn.Module:
    model = nn.Module()
    model.embed = VocabParallelEmbedding(rank, w["embed.weight"])
    model.qkv_proj = QKVParallelLinear(rank, w["q"], w["k"], w["v"])
    model.gate_up_proj = MergedColumnParallelLinear(rank, w["gate"], w["up"])
    model.down_proj = RowParallelLinear(rank, w["down_proj.weight"], w["down_proj.bias"])
    model.norm = RMSNorm(w["norm.weight"])
    return model


def _reference(w: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    fused = {
        "qkv_proj.weight": torch.cat([w["q"], w["k"], w["v"]]),
        "gate_up_proj.weight": torch.cat([w["gate"], w["up"]]),
    }
    whole = {k: v for k, v in w.items() if "." in k}
    return {k: v.double() for k, v in {**whole, **fused}.items()}


def _ranks(full: dict[str, torch.Tensor]) -> list:
    models = [_rank_model(r, full) for r in range(TP)]
    return [rank_source(m, from_module(m), r) for r, m in enumerate(models)]


def _ask(sources: list, moments: list | None = None):
    """One round on every rank, as the driver's collective_rpc would run it."""

    def ask(step: dict) -> list:
        if step["step"] == "moments":
            return moments or [rank_moments(s, BINS) for s in sources]
        return [rank_histograms(s, step["ranges"], BINS) for s in sources]

    return ask


def test_merged_shares_are_the_unsplit_tensors(full):
    sources = _ranks(full)
    merged = global_moments(_ask(sources), BINS)
    source = sources[0]
    ref = _reference(full)
    assert {t.name: t.shape for t in source.tensors} == {n: tuple(t.shape) for n, t in ref.items()}
    frames = frames_of(source, {t.storage_key: merged[t.name] for t in source.tensors}, BINS)
    stats = frames["tensor"].set_index("name")
    for name, t in ref.items():
        row = stats.loc[name]
        lo, hi = t.min().item(), t.max().item()
        assert row["numel"] == t.numel() and row["hist_sample"] == t.numel(), name
        assert math.isclose(row["mean"], t.mean().item(), rel_tol=1e-12, abs_tol=1e-15), name
        assert math.isclose(row["std"], t.std(unbiased=False).item(), rel_tol=1e-12), name
        assert math.isclose(row["l2"], t.norm().item(), rel_tol=1e-12), name
        assert (row["min"], row["max"]) == (lo, hi), name
        assert list(row["hist_counts"]) == np.histogram(t.numpy(), BINS, range=(lo, hi))[0].tolist(), name
    everything = torch.cat([t.reshape(-1) for t in ref.values()])
    root = frames["module"].set_index("name").loc[""]
    assert root["numel"] == everything.numel() == sum(t.numel for t in source.tensors)
    assert math.isclose(root["mean"], everything.mean().item(), rel_tol=1e-12)
    assert root["max"] == everything.max().item()  # the 99.0 vocabulary padding is left out


def test_a_rank_without_values_leaves_the_tensor_out(full):
    sources = _ranks(full)
    moments = [rank_moments(s, BINS) for s in sources]
    moments[1]["norm.weight"] = (None, "no values: meta tensor")
    merged = global_moments(_ask(sources, moments), BINS)
    assert merged["norm.weight"] == (None, "no values: meta tensor")
    assert merged["down_proj.bias"][0] is not None


def test_results_cross_the_rpc_as_plain_values(full):
    import json

    merged = global_moments(_ask(_ranks(full)), BINS)
    plain = json.loads(json.dumps(to_plain(merged)))  # nothing numpy left in it
    back = from_plain(plain)
    for name, (m, note) in merged.items():
        assert m is not None and note is None
        (b, _) = back[name]
        assert b is not None and b[:10] == m[:10] and b[11:] == m[11:] and (b.hist == m.hist).all()
