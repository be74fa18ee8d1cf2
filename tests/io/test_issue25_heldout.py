"""A second set of crafted files of the issue-25 kinds, made after the fix to attack it
(none of them is in the issue's corpus): each is refused with one line naming it, or read
correctly; nothing runs (a canary file), nothing crashes the process."""

# ruff: noqa: B006, B008, E501, RUF015
from __future__ import annotations

import collections
import io
import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

import nbinspect
from nbinspect import CheckpointError
from nbinspect.io import torch_file


def u(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def members(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zf:
        return [(n, zf.read(n)) for n in zf.namelist()]


def with_pkl(path, pkl, obj={"w": torch.ones(4)}, method=zipfile.ZIP_STORED, storage_method=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w") as zf:
        for n, d in members(obj):
            if n.endswith("data.pkl"):
                zf.writestr(n, pkl, method)
            else:
                zf.writestr(n, d, storage_method if "/data/" in n else zipfile.ZIP_STORED)


cases = {}
# 1 memo bomb: LONG_BINPUT 2**32-1
cases["memo_bomb.pt"] = lambda p: with_pkl(p, b"\x80\x02}r\xff\xff\xff\xff.")


# 2 GLOBAL text form of dotted name through DCP module + __builtin__ eval
def dcp_text(p):
    import torch.distributed.checkpoint as dcp

    dcp.save({"w": torch.ones(3)}, checkpoint_id=str(p), no_dist=True)
    (p / ".metadata").write_bytes(b"c__builtin__\neval\n(" + b"V__import__('os').system('touch %s')\ntR." % b"CANARY")


cases["dcp_text_global"] = dcp_text
# 3 deep tuple key (C-stack overflow on hash)
cases["deep_tuple.pt"] = lambda p: with_pkl(p, b"\x80\x02}" + b")" + b"\x85" * 200000 + b"K\x01s.")
# 4 deep list via appends (not tuples)
cases["deep_list.pt"] = lambda p: with_pkl(p, b"\x80\x02}" + u("w") + b"]" * 100000 + b"a" * 99999 + b"s.")
# 5 storage compressed with deflate
cases["compressed_storage.pt"] = lambda p: with_pkl(
    p,
    members({"w": torch.ones(4)})[0][1]
    if False
    else [d for n, d in members({"w": torch.ones(4)}) if n.endswith("data.pkl")][0],
    storage_method=zipfile.ZIP_DEFLATED,
)


# 6 view past the storage: offset huge
def view_past(p):
    t = torch.ones(4)

    class V:
        def __reduce_ex__(self, proto):
            return (
                torch._utils._rebuild_tensor_v2,
                (t.untyped_storage(), 2**40, (4,), (1,), False, collections.OrderedDict()),
            )

    torch.save({"w": V()}, p)


cases["view_past.pt"] = view_past


# 7 negative stride
def neg_stride(p):
    t = torch.ones(4)

    class V:
        def __reduce_ex__(self, proto):
            return (
                torch._utils._rebuild_tensor_v2,
                (t.untyped_storage(), 3, (4,), (-1,), False, collections.OrderedDict()),
            )

    torch.save({"w": V()}, p)


cases["neg_stride.pt"] = neg_stride


# 8 legacy format with os.system global
def legacy_evil(p):
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf, _use_new_zipfile_serialization=False)
    raw = buf.getvalue().replace(
        b"torch._utils\n_rebuild_tensor_v2", b"os\nsystem\n".ljust(len(b"torch._utils\n_rebuild_tensor_v2"), b"x")
    )
    p.write_bytes(raw)


cases["legacy_evil.pt"] = legacy_evil


# 9 legacy storage count lie
def legacy_lie(p):
    buf = io.BytesIO()
    torch.save({"w": torch.ones(2)}, buf, _use_new_zipfile_serialization=False)
    raw = bytearray(buf.getvalue())
    raw[-16:-8] = struct.pack("<q", 2**60)
    p.write_bytes(bytes(raw))


cases["legacy_lie.pt"] = legacy_lie
# 10 safetensors duplicate key
cases["dup.safetensors"] = lambda p: p.write_bytes(
    struct.pack("<Q", 112)
    + b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}'.ljust(
        112
    )
    + bytes(8)
)
# 11 safetensors huge zero-dim shape
cases["zero_dim.safetensors"] = lambda p: p.write_bytes(
    struct.pack("<Q", 80) + b'{"w":{"dtype":"F32","shape":[0,1000000000000000000000],"data_offsets":[0,0]}}'.ljust(80)
)


# 12 npz header nested tuple
def npz_deep(p):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 5000 + ")" * 5000 + ", }"
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr) + 1) + hdr.encode() + b"\n"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("w.npy", head)


cases["npz_deep.npz"] = npz_deep


# 13 npz stored member claiming 10**18 elements
def npz_big(p):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000000000,), }"
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr) + 1) + hdr.encode() + b"\n"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("w.npy", head + bytes(16))


cases["npz_big.npz"] = npz_big


# 14 hub cache symlink into another repo's blobs
def hub_other(p):
    a = p / "models--org--a"
    b = p / "models--org--b"
    for r in (a, b):
        (r / "blobs").mkdir(parents=True)
        (r / "refs").mkdir()
    save_file({"w": torch.full((2,), 31337.0)}, b / "blobs" / "x")
    snap = a / "snapshots" / "rev"
    snap.mkdir(parents=True)
    (snap / "model.safetensors").symlink_to(Path("../../../models--org--b/blobs/x"))


cases["hub_other"] = hub_other


# 15 ESC in npz member name and DCP fqn
def npz_esc(p):
    np.savez(p, **{"\x1b[2Jevil\x07": np.ones(2, np.float32)})


cases["npz_esc.npz"] = npz_esc


# 16 DCP chunk containing a FloatTensor(4096)
def dcp_uninit(p):
    import torch.distributed.checkpoint as dcp

    dcp.save({"w": torch.ones(4096)}, checkpoint_id=str(p), no_dist=True)

    class R:
        def __reduce_ex__(self, proto):
            return (torch.FloatTensor, (4096,))

    f = next(p.glob("*.distcp"))
    buf = io.BytesIO()
    torch.save(R(), buf)
    md = pickle.loads((p / ".metadata").read_bytes())
    for info in md.storage_data.values():
        info.offset, info.length = 0, len(buf.getvalue())
    f.write_bytes(buf.getvalue())
    (p / ".metadata").write_bytes(pickle.dumps(md))


cases["dcp_uninit"] = dcp_uninit
# 17 index with 300k entries
cases["model.safetensors.index.json"] = lambda p: p.write_text(
    json.dumps({"weight_map": {f"t{i}": "a.safetensors" for i in range(300000)}})
)


# 18 zip with two data.pkl at different prefixes
def two_pkl(p):
    with zipfile.ZipFile(p, "w") as zf:
        for n, d in members({"w": torch.ones(2)}):
            zf.writestr(n, d)
        for n, d in members({"w": torch.zeros(2)}):
            zf.writestr("other/" + n.split("/", 1)[1], d)


cases["two_pkl.pt"] = two_pkl
# 19 control chars in error path: file named with ESC
cases["\x1b]0;pwn\x07.pt"] = lambda p: p.write_bytes(b"PK\x03\x04junk")
# 20 BUILD on a tensor (setstate)
cases["build_tensor.pt"] = lambda p: with_pkl(
    p,
    b"\x80\x02}"
    + u("w")
    + b"ctorch._utils\n_rebuild_tensor_v2\n("
    + b"("
    + u("storage")
    + b"ctorch\nFloatStorage\n"
    + u("0")
    + u("cpu")
    + b"K\x04tQK\x00K\x04\x85K\x01\x85\x89}tR}"
    + u("__class__")
    + b"K\x01sbs.",
)


# 21 a qtensor with per-channel scales mismatched
def q_bad(p):
    q = torch.quantize_per_channel(torch.randn(4, 3), torch.ones(4), torch.zeros(4, dtype=torch.long), 0, torch.qint8)
    torch.save({"q": q}, p)


cases["q_ok.pt"] = q_bad


# 22 huge number of zip members (100k empty)
def many_members(p):
    with zipfile.ZipFile(p, "w") as zf:
        for n, d in members({"w": torch.ones(2)}):
            zf.writestr(n, d)
        for i in range(600):
            zf.writestr(f"archive/x{i}", b"")


cases["many_members.pt"] = many_members  # run with the member limit lowered to 500


READ = {"npz_esc.npz", "q_ok.pt"}  # legitimate, odd: read correctly
TARGET = {"hub_other": "models--org--a/snapshots/rev"}


@pytest.mark.parametrize("name", sorted(cases))
def test_heldout(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch_file, "MAX_ZIP_MEMBERS", 500)
    path = tmp_path / name
    cases[name](path)
    target = path / TARGET[name] if name in TARGET else path
    if name in READ:
        source = nbinspect.load_checkpoint(target)
        assert nbinspect.stats(source)["mean"].notna().all()
    else:
        with pytest.raises(CheckpointError) as exc:
            nbinspect.stats(nbinspect.load_checkpoint(target))
        text = str(exc.value)
        assert "\n" not in text and "\x1b" not in text and "\x07" not in text and len(text) < 1000, text
    assert not (tmp_path / "CANARY").exists()
