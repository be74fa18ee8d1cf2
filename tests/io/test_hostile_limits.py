"""Never hang, never exhaust memory: crafted files of a few KB that describe something huge
or endless are read within documented limits, or refused with one line naming the file.
Each case runs in a subprocess with a timeout, so a regression fails instead of hanging."""

from __future__ import annotations

import json
import os
import socket
import struct

import pytest
import torch
from torch import nn

import nbinspect
from nbinspect import CheckpointError, load_checkpoint
from nbinspect.core.limits import MAX_DEPTH, MAX_HEADER_BYTES, MAX_METADATA_ITEMS, MAX_TENSORS

from ..hostile_support import baseline_mb, isolated


def _safetensors(path, header: dict | bytes, data: bytes = b"") -> None:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def _refused(call: str, path, timeout: float = 60) -> tuple[str, float]:
    """(the CheckpointError's message, peak resident MB) of ``nbinspect.<call>(path)`` in a subprocess."""
    out, peak = isolated(
        f"""
        import nbinspect
        try:
            nbinspect.{call}({str(path)!r})
        except nbinspect.CheckpointError as exc:
            print(exc)
        """,
        timeout=timeout,
    )
    return out.strip(), peak


def test_shared_list_dag_metadata_is_described_within_a_budget(tmp_path):
    a: list = []
    for _ in range(60):  # a = [a, a] sixty times: 2**60 paths through 60 lists
        a = [a, a]
    torch.save({"model": {"w": torch.ones(2)}, "history": a}, tmp_path / "dag.pt")
    assert (tmp_path / "dag.pt").stat().st_size < 4096
    out, _ = isolated(
        f"""
        import nbinspect
        src = nbinspect.load_checkpoint({str(tmp_path / "dag.pt")!r})
        print(src.metadata["history"])
        """,
        timeout=60,
    )
    # each list once: 60 lists plus the innermost empty one; the depth limit says what was cut
    assert out.startswith("list of 2 entries (0 tensors, 0 bytes)")
    assert f"nested deeper than {MAX_DEPTH} levels" not in out  # 61 levels are within the limit


def test_metadata_cut_says_what_was_cut(tmp_path):
    deep: list = [torch.ones(1)]
    for _ in range(MAX_DEPTH + 10):
        deep = [deep]
    wide = [[i] for i in range(MAX_METADATA_ITEMS + 5)]
    meta = load_checkpoint({"model": {"w": torch.ones(1)}, "deep": deep, "wide": wide}).metadata
    assert meta["deep"].endswith(f"; nested deeper than {MAX_DEPTH} levels, not walked further")
    assert meta["deep"].startswith("list of 1 entries (0 tensors")  # the tensor lies below the cut
    assert meta["wide"].endswith(f"; over {MAX_METADATA_ITEMS:,} items, not walked further")


def test_self_referencing_and_very_deep_containers(tmp_path):
    loop: dict = {"n": 1}
    loop["self"] = loop
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    meta = load_checkpoint({"model": {"w": torch.ones(3)}, "loop": loop, "deep": deep}).metadata
    assert meta["loop"] == "dict of 2 entries (0 tensors, 0 bytes)"
    assert "nested deeper than" in meta["deep"]
    # the same from a file: torch.load itself reads deep lists without recursion
    torch.save({"model": {"w": torch.ones(3)}, "loop": loop}, tmp_path / "loop.pt")
    assert load_checkpoint(tmp_path / "loop.pt").metadata["loop"] == "dict of 2 entries (0 tensors, 0 bytes)"


def test_state_dict_containing_itself_is_not_expanded_again():
    weights: dict = {"w": torch.ones(2)}
    weights["again"] = weights
    source = load_checkpoint({"state_dict": weights})
    assert [t.name for t in source.tensors] == ["w"]
    assert source.metadata["again"] == "the same dict as 'the whole state_dict', not expanded again"


def test_weights_nested_too_deep_are_refused():
    weights: dict = {"w": torch.ones(1)}
    for _ in range(MAX_DEPTH + 1):
        weights = {"x": weights}
    with pytest.raises(CheckpointError, match=f"nested more than {MAX_DEPTH} levels deep"):
        load_checkpoint({"state_dict": weights})


def test_shared_dicts_do_not_expand_exponentially(tmp_path):
    level: dict = {"w": torch.zeros(1)}
    for _ in range(16):  # 16 levels of one dict twice: 65,536 names by expansion
        level = {"a": level, "b": level}
    torch.save(level, tmp_path / "shared.pt")
    assert (tmp_path / "shared.pt").stat().st_size < 4096
    out, _ = isolated(
        f"""
        import nbinspect
        src = nbinspect.load_checkpoint({str(tmp_path / "shared.pt")!r})
        print(len(src.tensors), nbinspect.totals(src)["total_params"])
        print(src.metadata["b"])
        """,
        timeout=60,
    )
    first, second = out.splitlines()
    assert first == "1 1"  # one tensor stored once
    assert second == "the same dict as 'a', not expanded again"


def test_broadcast_view_counts_its_storage(tmp_path):
    torch.save({"w": torch.zeros(1).expand(10**10), "b": torch.ones(3)}, tmp_path / "expand.pt")
    assert (tmp_path / "expand.pt").stat().st_size < 2048
    out, peak = isolated(
        f"""
        import nbinspect
        insp = nbinspect.inspect({str(tmp_path / "expand.pt")!r})
        p = insp.params.set_index("name")
        s = insp.stats.set_index("name")
        print(p.loc["w", "shape"], p.loc["w", "bytes"], insp.totals["param_bytes"], s.loc["w", "mean"])
        """,
        timeout=120,
    )
    assert out.split() == ["(10000000000,)", "4", "16", "0.0"]  # 4 bytes stored, not 40 GB
    assert peak < baseline_mb() + 200


def test_many_tensor_header_is_refused_past_the_limit_in_bounded_memory(tmp_path):
    n = MAX_TENSORS + 1
    path = tmp_path / "many.safetensors"
    entries = ",".join(f'"t{i}":{{"dtype":"F32","shape":[0],"data_offsets":[0,0]}}' for i in range(n))
    _safetensors(path, ("{" + entries + "}").encode())
    out, peak = _refused("inspect", path, timeout=300)
    assert out == f"{path}: header lists {n:,} tensors, over the limit of {MAX_TENSORS:,}"
    assert peak < baseline_mb() + 600  # the parsed header, nothing per tensor (was 2.7 GB at 300,000)


def test_memory_grows_in_proportion_to_the_tensors(tmp_path):
    """A header of 20,000 empty tensors: memory per tensor shown stays a few KB."""
    n = 20_000
    path = tmp_path / "wide.safetensors"
    _safetensors(path, {f"layer{i}.w": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(n)})
    out, peak = isolated(
        f"""
        import nbinspect
        print(nbinspect.inspect({str(path)!r}).totals["num_modules"])
        """,
        timeout=300,
    )
    assert int(out) == n + 1
    assert (peak - baseline_mb()) * 2**20 / n < 16 * 1024  # bytes per tensor (measured ~4 KB)


def test_header_size_limit(tmp_path):
    path = tmp_path / "big.safetensors"
    path.write_bytes(struct.pack("<Q", MAX_HEADER_BYTES + 1) + b"{" + b" " * 16)
    with pytest.raises(CheckpointError, match=f"over the limit of {MAX_HEADER_BYTES:,}"):
        load_checkpoint(path)


def test_deeply_nested_header_json(tmp_path):
    path = tmp_path / "deep.safetensors"
    _safetensors(path, b'{"__metadata__":' + b"[" * 200_000 + b"]" * 200_000 + b"}")
    with pytest.raises(CheckpointError, match=r"deep\.safetensors: corrupt safetensors header \(JSON nested too"):
        load_checkpoint(path)
    index = tmp_path / "m.index.json"
    index.write_text('{"weight_map":' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(CheckpointError, match=r"m\.index\.json: corrupt shard index \(JSON nested too deeply"):
        load_checkpoint(index)


@pytest.mark.parametrize("kind", ["fifo", "socket", "device"])
def test_non_regular_files_are_refused(tmp_path, kind):
    if kind == "fifo":
        path = tmp_path / "fifo.pt"
        os.mkfifo(path)
        expected = "is a FIFO (named pipe), not a checkpoint file"
    elif kind == "socket":
        path = tmp_path / "s.safetensors"
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        expected = "is a socket, not a checkpoint file"
    else:
        path, expected = "/dev/zero", "is a device, not a checkpoint file"
    assert _refused("load_checkpoint", path)[0] == f"{path}: {expected}"


def test_fifo_in_a_folder_and_as_a_shard_is_refused(tmp_path):
    os.mkfifo(tmp_path / "a.safetensors")
    (tmp_path / "m.index.json").write_text(json.dumps({"weight_map": {"w": "a.safetensors"}}))
    for target in (tmp_path, tmp_path / "m.index.json"):
        out = _refused("load_checkpoint", target)[0]
        assert "a.safetensors: is a FIFO (named pipe), not a checkpoint file" in out


def test_module_cycles_are_reported():
    a, b = nn.Module(), nn.Module()
    a.b = b
    b.a = a
    with pytest.raises(ValueError, match=r"module cycle: 'b\.a' is the root module again"):
        nbinspect.inspect(a)
    box = nn.Sequential(nn.Linear(2, 2))
    box.add_module("me", box)
    with pytest.raises(ValueError, match=r"module cycle: 'me' is the root module again"):
        nbinspect.layers(box)
    outer = nn.Sequential(nn.Sequential(nn.ReLU()))
    outer[0].add_module("up", outer[0])
    with pytest.raises(ValueError, match=r"module cycle: '0\.up' is '0' again"):
        nbinspect.params(outer)


def test_a_module_shared_many_times_is_not_a_cycle():
    leaf = nn.Linear(2, 2)
    model = nn.Sequential(leaf, leaf, nn.Sequential(leaf))
    frame = nbinspect.layers(model)
    assert list(frame["name"]) == ["", "0", "1", "2", "2.0"]
    assert nbinspect.totals(model)["total_params"] == 6
