"""The engine header of a vLLM inspection: text above the layer tree, and a one-line label
the widget shows beside the model name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from .format import format_bytes, format_count, is_missing
from .text import table

__all__ = ["engine_label", "engine_text"]


def _kv_cache(t: Mapping[str, Any]) -> str:
    blocks, size = t.get("kv_cache_blocks"), t.get("kv_cache_block_size")
    if is_missing(blocks) or is_missing(size):
        return "not allocated"
    return f"{format_count(blocks)} blocks × {format_count(size)} tokens, {format_bytes(t.get('kv_cache_bytes'))}"


def _memory_setting(t: Mapping[str, Any]) -> str:
    if not is_missing(t.get("kv_cache_memory_bytes")):
        return f"kv_cache_memory_bytes {format_bytes(t['kv_cache_memory_bytes'])} (overrides gpu_memory_utilization)"
    return f"gpu_memory_utilization {t.get('gpu_memory_utilization')} (on CPU: share of RAM for the KV cache)"


def engine_label(t: Mapping[str, Any]) -> str:
    """'vLLM 0.32.0 · LlamaForCausalLM · float32 · KV cache 256 blocks × 128 tokens, 32.0 MiB · TP 1 · PP 1'."""
    return " · ".join(
        [
            str(t.get("engine")),
            str(t.get("architecture")),
            str(t.get("dtype")) + (f" ({t['quantization']})" if t.get("quantization") else ""),
            f"KV cache {_kv_cache(t)}",
            f"TP {t.get('tensor_parallel_size')}",
            f"PP {t.get('pipeline_parallel_size')}",
        ]
    )


def _sample(io: Mapping[str, Any]) -> list[list[str]]:
    prompts, outputs = io.get("input") or [], io.get("output") or []
    if not prompts or not outputs:
        return []
    p, o = prompts[0], outputs[0]
    sampling = p.get("sampling_params") or {}
    return [
        ["Sample prompt", f"{p['value']!r} ({p.get('num_tokens')} tokens)"],
        ["Generated", f"{o['value']!r} ({o.get('num_tokens')} tokens, temperature {sampling.get('temperature')})"],
    ]


def _checkpoint(compare: pd.DataFrame | None) -> list[list[str]]:
    if compare is None:
        return []
    counts = compare["status"].value_counts()
    text = ", ".join(f"{int(n)} {status}" for status, n in counts.items())
    unmatched = compare[compare["status"].isin(["added", "removed"])]["name"].tolist()
    rows = [["Checkpoint", f"{len(compare)} weights compared with the folder: {text}"]]
    if unmatched:
        rows.append(["  unmatched", ", ".join(unmatched[:6]) + (" ..." if len(unmatched) > 6 else "")])
    return rows


def engine_text(name: str, t: Mapping[str, Any], io: Mapping[str, Any], frames: Mapping[str, pd.DataFrame]) -> str:
    """The header: the engine's facts, sample generation, checkpoint match and components."""
    where = "another process" if t.get("multiprocessing") else "this process"
    quant = t.get("quantization") or "not quantized"
    rows = [
        ["Engine", f"{t.get('engine')}, engine core in {where}"],
        ["Model", f"{t.get('model_path')} ({t.get('architecture')}, {t.get('dtype')}, {quant})"],
        ["Max model length", f"{format_count(t.get('max_model_len'))} tokens"],
        ["Parallel", f"tensor {t.get('tensor_parallel_size')} × pipeline {t.get('pipeline_parallel_size')}"],
        ["KV cache", _kv_cache(t)],
        ["Memory setting", _memory_setting(t)],
        ["Tokenizer", f"{t.get('tokenizer')}, {format_count(t.get('vocab_size'))} tokens"],
        *_sample(io),
        *_checkpoint(frames.get("compare")),
    ]
    heading = f"{name}: vLLM engine"
    parts = [heading + "\n" + "=" * len(heading), table(rows[0], rows[1:], [False, False])]
    components = frames.get("components")
    if components is not None and len(components):
        cells = [
            [r.component, r.type, r.process, "" if is_missing(r.detail) else r.detail]
            for r in components.itertuples(index=False)
        ]
        parts.append(table(["Component", "Type", "Runs", "Detail"], cells, [False] * 4))
    return "\n\n".join(parts)
