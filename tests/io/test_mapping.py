"""Guarded mappings (``io/mapping.py``): a file truncated while nbinspect has it mapped and is
reducing it gives the one-line error and the process lives; a bus error anywhere else still
kills the process as it did without nbinspect (faulthandler's report, the default action).
Each case that could crash runs in a child process; the files are written by the tests."""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import nbinspect
from nbinspect.io import mapping
from nbinspect.io.files import FileHandle

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.machine() not in ("x86_64", "aarch64"),
    reason="mappings are guarded on Linux (x86-64, arm64) only",
)
ROOT = Path(__file__).resolve().parents[2]


def _child(code: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NBINSPECT_WARM_UP": "0"}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


# The child reduces a real safetensors file; when nbinspect maps its second window, another
# thread or process truncates the file to a third before the kernel reads that window.
_TRUNCATED_WHILE_MAPPED = """
    import os, subprocess, sys, threading
    import torch
    from safetensors.torch import save_file
    import nbinspect
    from nbinspect.analyze import fused
    from nbinspect.io import mapping

    path, by, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(threads)
    save_file({"a": torch.randn(3 << 20), "b": torch.randn(1 << 20).bfloat16()}, path)
    fused.kernels(fused.FUSED_ABOVE)
    fused.LOADED_ABOVE, fused.WINDOW_BYTES, fused.MAPPED = 0, 1 << 20, True
    size, mapped = os.path.getsize(path), [0]
    map_window = mapping.Window.map

    def truncating(self, offset, nbytes):
        array = map_window(self, offset, nbytes)
        mapped[0] += 1
        if mapped[0] == 2:
            if by == "thread":
                worker = threading.Thread(target=os.truncate, args=(path, size // 3))
                worker.start()
                worker.join()
            else:
                subprocess.run([sys.executable, "-c", f"import os; os.truncate({path!r}, {size // 3})"], check=True)
        return array

    mapping.Window.map = truncating
    try:
        nbinspect.stats(path)
        print("no error")
    except nbinspect.CheckpointError as exc:
        print("error:", exc)
    print("faults", mapping.faults(), "windows", mapped[0])
    print("alive")
"""


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("by", ["thread", "process"])
def test_a_file_truncated_while_mapped_and_reduced_is_a_one_line_error_and_the_process_lives(tmp_path, by, threads):
    path = tmp_path / "model.safetensors"
    done = _child(_TRUNCATED_WHILE_MAPPED, str(path), by, str(threads))
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "alive"
    assert lines[0].startswith("error: ") and "model.safetensors: changed while it was read (" in lines[0]
    assert int(lines[1].split()[1]) >= 1  # the handler covered at least one bus error


# What each child below ends with: its own file mapped with Python's mmap module, truncated,
# and the lost page touched (a bus error that is not nbinspect's).
_OWN_BUS_ERROR = """
    with open(theirs, "wb") as f:
        f.write(b"\\1" * (1 << 20))
    f = open(theirs, "rb")
    m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    os.truncate(theirs, 4096)
    print("touching", flush=True)
    print(m[1 << 19])
    print("survived")
"""

# The child installs nbinspect's handler and keeps one of its mappings live, then maps its own
# file with Python's mmap module, truncates it and touches the lost page: not nbinspect's fault.
_FOREIGN = (
    """
    import faulthandler, mmap, os, sys
    import numpy as np
    from nbinspect.io import mapping

    ours, theirs, when = sys.argv[1:4]
    if when == "faulthandler-first":
        faulthandler.enable()
    np.arange(1 << 16, dtype=np.float32).tofile(ours)
    fd = os.open(ours, os.O_RDONLY)
    window = mapping.window(fd, "ours", lambda: None)
    assert window is not None
    live = window.map(0, 1 << 18)
    if when == "faulthandler-after":
        faulthandler.enable()  # replaces nbinspect's handler; its own previous action is nbinspect's
"""
    + _OWN_BUS_ERROR
)


@pytest.mark.parametrize("when", ["no-faulthandler", "faulthandler-first", "faulthandler-after"])
def test_a_bus_error_outside_nbinspects_mappings_still_kills_the_process(tmp_path, when):
    done = _child(_FOREIGN, str(tmp_path / "ours.bin"), str(tmp_path / "theirs.bin"), when)
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "touching" in done.stdout and "survived" not in done.stdout
    assert ("Fatal Python error: Bus error" in done.stderr) == (when != "no-faulthandler")


def test_a_bus_error_sent_by_kill_is_not_covered(tmp_path):
    """A SIGBUS another process sends (no faulting address) gets the previous action: death."""
    code = """
        import os, signal, sys
        import numpy as np
        from nbinspect.io import mapping
        np.zeros(1024, np.float32).tofile(sys.argv[1])
        window = mapping.window(os.open(sys.argv[1], os.O_RDONLY), "ours", lambda: None)
        live = window.map(0, 4096)
        os.kill(os.getpid(), signal.SIGBUS)
        print("survived")
    """
    done = _child(code, str(tmp_path / "ours.bin"))
    assert done.returncode == -signal.SIGBUS and "survived" not in done.stdout


def test_a_fault_in_a_file_that_looks_unchanged_after_is_still_an_error(tmp_path):
    """The storage failing under a mapping (EIO on NFS/FUSE) looks like this: a bus error, then
    the file as it was. The numbers read over the zeros are never returned."""
    path = tmp_path / "flaky.bin"
    np.arange(1 << 18, dtype=np.float32).tofile(path)
    handle = FileHandle.open(path)
    stat = path.stat()
    window = mapping.window(handle.fd, handle.where, handle.check)
    assert window is not None
    before = mapping.faults()
    try:
        x = window.map(8, (1 << 20) - 8).view(np.float32)
        os.truncate(path, 1 << 16)
        assert x[-1] == 0  # past the end: a zero page the handler mapped, not a crash
        os.truncate(path, 1 << 20)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        handle.check()  # the file's identity is as it was
        with pytest.raises(nbinspect.CheckpointError, match=r"flaky.bin: cannot read a tensor \(the storage failed"):
            window.unmap()
    finally:
        window.close()
    assert mapping.faults() == before + 1


def test_with_every_slot_taken_the_reader_falls_back_to_pread(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(b"\0" * 4096)
    handle = FileHandle.open(path)
    taken = []
    try:
        while (w := mapping.window(handle.fd, handle.where, handle.check)) is not None:
            taken.append(w)
        assert len(taken) <= mapping.SLOTS
    finally:
        for w in taken:
            w.close()
    again = mapping.window(handle.fd, handle.where, handle.check)
    assert again is not None
    again.close()


# The child reads a file through nbinspect's mappings (statistics, two threads), then touches
# a lost page of its own mapping; `when` says what it did with faulthandler around the reads:
# "between" enables it after a first read, reads again and disables it.
_AFTER_THE_READ = (
    """
    import ctypes, faulthandler, mmap, os, signal, sys
    import torch
    from safetensors.torch import save_file
    import nbinspect
    from nbinspect.analyze import fused
    from nbinspect.io import mapping

    ours, theirs, when = sys.argv[1:4]
    libc = ctypes.CDLL(None)

    def action():
        buffer = ctypes.create_string_buffer(256)
        assert libc.sigaction(signal.SIGBUS, None, buffer) == 0
        return ctypes.c_void_p.from_buffer(buffer).value

    save_file({"a": torch.randn(1 << 20), "b": torch.randn(1 << 20)}, ours)
    fused.kernels(fused.FUSED_ABOVE)
    fused.LOADED_ABOVE, fused.WINDOW_BYTES, fused.MAPPED = 0, 1 << 20, True
    if when == "faulthandler-between":
        nbinspect.stats(ours)
    if when != "no-faulthandler":
        faulthandler.enable()
    before = action()
    opened = mapping.Window.map
    counted = [0]

    def counting(self, offset, nbytes):
        counted[0] += 1
        return opened(self, offset, nbytes)

    mapping.Window.map = counting
    nbinspect.stats(ours)
    print("windows", counted[0], "same action", action() == before, flush=True)
    if when != "no-faulthandler":
        faulthandler.disable()
"""
    + _OWN_BUS_ERROR
)


@pytest.mark.parametrize("when", ["no-faulthandler", "faulthandler-around", "faulthandler-between"])
def test_once_the_last_mapping_is_closed_the_process_has_its_own_sigbus_action_again(tmp_path, when):
    """The handler is installed only while nbinspect has a window mapped: after the read the
    action is the one from before (a bus error of the process's own then kills it as without
    nbinspect, not a handler of faulthandler's that was disabled since and would loop)."""
    files = str(tmp_path / "ours.safetensors"), str(tmp_path / "theirs.bin")
    try:
        done = _child(_AFTER_THE_READ, *files, when, timeout=60)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the bus error looped instead of killing the child: {exc.stdout!r}") from None
    first = done.stdout.splitlines()[0].split()
    assert int(first[1]) >= 2 and first[-1] == "True", done.stdout
    assert done.returncode == -signal.SIGBUS, (done.returncode, done.stdout, done.stderr[-2000:])
    assert "touching" in done.stdout and "survived" not in done.stdout
