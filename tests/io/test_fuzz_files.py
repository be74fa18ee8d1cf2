"""A structure-aware fuzzer of the reading boundary (hypothesis).

Each strategy builds malformed files of one format from its structure: torch zips whose
``data.pkl`` is a random pickle program over real and dangerous globals (``os.system``,
``builtins.eval``, dotted names through a module that imports ``os``), byte flips and
truncations of valid torch files, safetensors headers with random names, dtypes, huge and
negative shapes and offsets, npz members with random headers and compression, DCP
``.metadata`` pickles and shard indexes naming files outside the folder. The property is
the contract of issue 25: reading the file and computing its statistics either succeeds or
raises one :class:`CheckpointError` line; it takes bounded time; nothing runs (a canary
file that any executed command would create, and an audit hook on process creation); no
file outside the example's folder is opened.

``make test`` runs ~30-60 s in all (``NBINSPECT_FUZZ_EXAMPLES``, default 300 per format);
``make fuzz`` runs far more. A failing input is written to ``tests/io/regressions/`` and
replayed by ``test_regressions`` forever after.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbinspect
from nbinspect import CheckpointError

EXAMPLES = int(os.environ.get("NBINSPECT_FUZZ_EXAMPLES", "300"))
REGRESSIONS = Path(__file__).parent / "regressions"
SECONDS = 10.0  # per example: far above what any example should take
_AUDIT: dict[str, object] = {"events": [], "root": None}


def _hook(event: str, args: tuple) -> None:
    if event in ("os.system", "subprocess.Popen", "os.exec", "os.posix_spawn", "os.fork"):
        _AUDIT["events"].append(event)  # type: ignore[union-attr]
    elif event == "open" and _AUDIT["root"] and args and isinstance(args[0], str | bytes):
        path = os.fsdecode(args[0])
        if "outside" in path and os.path.realpath(path).startswith(str(_AUDIT["root"])):
            _AUDIT["events"].append(f"open {path}")  # type: ignore[union-attr]


sys.addaudithook(_hook)


def _check(path: Path, folder: Path) -> None:
    """The contract, for one crafted input at `path` (the case folder is `folder`)."""
    canary = folder / "canary"
    _AUDIT["events"], _AUDIT["root"] = [], str(folder)
    start = time.perf_counter()
    try:
        source = nbinspect.load_checkpoint(path)
        nbinspect.stats(source)
    except CheckpointError as exc:
        text = str(exc)
        assert "\n" not in text and len(text) < 2000, text[:500]
    except Exception as exc:  # anything else breaks the contract: keep the input
        _keep(path, folder, f"{type(exc).__name__}: {exc}")
        raise
    finally:
        _AUDIT["root"] = None
    elapsed = time.perf_counter() - start
    problems = list(_AUDIT["events"])  # type: ignore[call-overload]
    problems += ["canary"] if canary.exists() else []
    problems += [f"{elapsed:.1f} s"] if elapsed > SECONDS else []
    if problems:
        _keep(path, folder, ", ".join(map(str, problems)))
        pytest.fail(f"{path.name}: {problems}")


def _keep(path: Path, folder: Path, why: str) -> None:
    REGRESSIONS.mkdir(exist_ok=True)
    stamp = f"{int(time.time() * 1000)}"
    if path.is_file():
        (REGRESSIONS / f"{stamp}-{path.name}").write_bytes(path.read_bytes())
        (REGRESSIONS / f"{stamp}-{path.name}.why").write_text(why[:2000] + "\n")


# --- pickle programs ---------------------------------------------------------------------------

_GLOBALS = [
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch._utils", "_rebuild_parameter"),
    ("torch._utils", "_rebuild_meta_tensor_no_storage"),
    ("torch._utils", "_rebuild_wrapper_subclass"),
    ("torch._utils", "_rebuild_qtensor"),
    ("torch._tensor", "_rebuild_from_type_v2"),
    ("collections", "OrderedDict"),
    ("builtins", "bytearray"),
    ("builtins", "set"),
    ("builtins", "eval"),
    ("builtins", "getattr"),
    ("os", "system"),
    ("torch.distributed.checkpoint.metadata", "os.system"),
    ("torch", "FloatTensor"),
    ("torch", "FloatStorage"),
    ("torch", "float32"),
    ("torch", "Size"),
    ("_codecs", "encode"),
    ("torch.serialization", "_get_layout"),
]


def _unicode(s: str) -> bytes:
    b = s.encode()
    return b"\x8c" + bytes([len(b)]) + b if len(b) < 256 else b"X" + struct.pack("<I", len(b)) + b


@st.composite
def pickle_programs(draw: st.DrawFn, canary: str) -> bytes:
    ops = [b"\x80\x02"]
    for _ in range(draw(st.integers(1, 40))):
        kind = draw(st.integers(0, 14))
        if kind == 0:
            module, name = draw(st.sampled_from(_GLOBALS))
            ops.append(b"c" + module.encode() + b"\n" + name.encode() + b"\n")
        elif kind == 1:
            module, name = draw(st.sampled_from(_GLOBALS))
            ops.append(_unicode(module) + _unicode(name) + b"\x93")
        elif kind == 2:
            ops.append(_unicode(draw(st.sampled_from([f"touch {canary}", "storage", "0", "cpu", "a.b", "\x1b[2J"]))))
        elif kind == 3:
            n = draw(st.integers(-(2**70), 2**70))
            raw = n.to_bytes((n.bit_length() + 8) // 8 or 1, "little", signed=True)
            ops.append(b"\x8a" + bytes([len(raw)]) + raw)
        elif kind == 4:
            ops.append(b"J" + struct.pack("<i", draw(st.integers(-(2**31), 2**31 - 1))))
        elif kind == 5:
            ops.append(draw(st.sampled_from([bytes([c]) for c in b"(t)}]\x85\x86\x87RbeusaQ\x8102N\x88"])))
        elif kind == 6:
            ops.append(b"q" + bytes([draw(st.integers(0, 255))]))
        elif kind == 7:
            ops.append(b"h" + bytes([draw(st.integers(0, 255))]))
        elif kind == 8:
            ops.append(b"r" + struct.pack("<I", draw(st.integers(0, 2**32 - 1))))
        elif kind == 9:  # a claimed length far past the data
            claimed = struct.pack("<Q", draw(st.integers(0, 2**64 - 1)))
            ops.append(draw(st.sampled_from([b"\x8d", b"\x8e", b"\x96"])) + claimed)
        elif kind == 10:
            ops.append(bytes([draw(st.integers(0, 255))]))
        elif kind == 11:
            ops.append(b"G" + struct.pack(">d", draw(st.floats(allow_nan=True))))
        elif kind == 12:
            ops.append(b"\x94")
        elif kind == 13:
            storage = b"c" + b"torch\nFloatStorage\n" + _unicode("0") + _unicode("cpu") + b"K\x04tQ"
            ops.append(b"(" + _unicode("storage") + storage)
        else:
            ops.append(b"}" + _unicode(draw(st.sampled_from(["w", "a.b", "_metadata", "items"]))))
    ops.append(b".")
    return b"".join(ops)


def _valid_torch_bytes() -> bytes:
    buf = io.BytesIO()
    torch.save({"w": torch.arange(6.0).view(2, 3), "b": torch.ones(2), "step": 3}, buf)
    return buf.getvalue()


def _with_pickle(data_pkl: bytes) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(_valid_torch_bytes())) as src, zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, data_pkl if info.filename.endswith("data.pkl") else src.read(info))
    return out.getvalue()


_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@_SETTINGS
@given(st.data())
def test_torch_pickle_programs(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        program = data.draw(pickle_programs(str(folder / "canary")))
        path = folder / "f.pt"
        path.write_bytes(_with_pickle(program))
        _check(path, folder)


@_SETTINGS
@given(st.binary(min_size=1, max_size=8), st.integers(0, 10**6), st.sampled_from(["flip", "cut", "insert"]))
def test_torch_file_mutations(patch: bytes, where: int, how: str) -> None:
    raw = bytearray(_valid_torch_bytes())
    at = where % len(raw)
    if how == "flip":
        raw[at : at + len(patch)] = patch
    elif how == "cut":
        del raw[at:]
    else:
        raw[at:at] = patch
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.pt"
        path.write_bytes(bytes(raw))
        _check(path, Path(tmp))


_NAMES = st.text(alphabet=st.sampled_from(list("ab.0_\x1b\x00\n/é")), min_size=0, max_size=40)
_INTS = st.one_of(st.integers(-5, 64), st.integers(-(2**70), 2**70), st.just(10**30))


@_SETTINGS
@given(
    st.dictionaries(
        _NAMES,
        st.fixed_dictionaries(
            {
                "dtype": st.sampled_from(["F32", "F16", "BF16", "I64", "BOOL", "F8_E4M3", "X", 3]),
                "shape": st.lists(_INTS, max_size=5),
                "data_offsets": st.lists(_INTS, min_size=0, max_size=3),
            }
        ),
        max_size=5,
    ),
    st.integers(0, 256),
    st.booleans(),
)
def test_safetensors_headers(header: dict, data_len: int, lie: bool) -> None:
    raw = json.dumps(header).encode()
    length = len(raw) + (7 if lie else 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.safetensors"
        path.write_bytes(struct.pack("<Q", length) + raw + bytes(data_len))
        _check(path, Path(tmp))


@_SETTINGS
@given(
    st.lists(_INTS, max_size=4),
    st.sampled_from(["<f4", "<f8", ">i4", "|u1", "<f16", "O", "V2", "<c8", "S3"]),
    st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2]),
    st.integers(0, 512),
    st.booleans(),
)
def test_npz_members(shape: list, descr: str, method: int, data_len: int, fortran: bool) -> None:
    header = "{'descr': %r, 'fortran_order': %r, 'shape': %s, }" % (descr, fortran, tuple(shape))  # noqa: UP031
    head = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header) + 1) + header.encode() + b"\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "f.npz"
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("w.npy", head + bytes(data_len), method)
            buf = io.BytesIO()
            np.save(buf, np.ones(3, np.float32))
            zf.writestr("ok.npy", buf.getvalue())
        _check(path, Path(tmp))


_SHARDS = st.sampled_from(["../outside/x.safetensors", "/etc/passwd", "link.safetensors", "a.safetensors", ""])


@_SETTINGS
@given(st.lists(st.one_of(_NAMES, _SHARDS), min_size=1, max_size=4))
def test_shard_indexes_and_symlinks(shards: list) -> None:
    from safetensors.torch import save_file

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "model"
        (Path(tmp) / "outside").mkdir()
        folder.mkdir()
        save_file({"w": torch.ones(2)}, Path(tmp) / "outside" / "x.safetensors")
        save_file({"t0": torch.ones(2)}, folder / "a.safetensors")
        (folder / "link.safetensors").symlink_to(Path(tmp) / "outside" / "x.safetensors")
        index = folder / "model.safetensors.index.json"
        index.write_text(json.dumps({"weight_map": {f"t{i}": s for i, s in enumerate(shards)}}))
        _check(index, Path(tmp))


@_SETTINGS
@given(st.data())
def test_dcp_metadata_programs(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "ckpt"
        folder.mkdir()
        program = data.draw(pickle_programs(str(Path(tmp) / "canary")))
        (folder / ".metadata").write_bytes(program)
        (folder / "__0_0.distcp").write_bytes(_valid_torch_bytes())
        _check(folder, Path(tmp))


@pytest.mark.parametrize("path", sorted(p for p in REGRESSIONS.glob("*") if not p.name.endswith(".why")), ids=str)
def test_regressions(path: Path, tmp_path: Path) -> None:
    """Inputs the fuzzer (or a person) found once: they keep the contract forever."""
    target = tmp_path / path.name.split("-", 1)[-1]
    target.write_bytes(path.read_bytes())
    _check(target, tmp_path)
