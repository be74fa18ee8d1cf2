"""The `nbinspect` command for tests, without paying for ``import torch`` at every call.

On this 2-core machine a fresh ``nbinspect`` process spends ~3.5 s importing torch before
it reads its arguments, and the documented command blocks run it dozens of times. A
server started once imports torch, pandas and nbinspect, then forks a child per command:
the child takes the caller's stdin/stdout/stderr (passed over a Unix socket), working
folder, environment, ``sys.path`` (as ``python -m nbinspect`` builds it there) and
arguments, runs ``python -m nbinspect``'s code and exits with its status, which the
client exits with. Each command is still its own process (its own exit code, files,
signals, crash); only the imports are shared. Without the server (its socket missing)
the client runs the real ``python -m nbinspect``.

    server = CliServer(folder, env); server.start(); client_script(server.socket, python)
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["INSTALLED", "CliServer", "client_script", "console_script"]

# the kernels too: loaded (compiled once per machine, in the package's __pycache__) before any fork
PRELOAD = (
    "torch",
    "numpy",
    "pandas",
    "yaml",
    "safetensors",
    "nbinspect",
    "nbinspect.ui.cli",
    "nbinspect.analyze.kernels",
)

_SERVE = r"""
import importlib, io, json, os, runpy, signal, socket, struct, sys
path, preload = sys.argv[1], sys.argv[2].split(",")
for name in preload:
    try:
        importlib.import_module(name)
    except Exception:
        pass
base = [p for p in sys.path if p and p not in os.environ.get("PYTHONPATH", "").split(os.pathsep)]
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the system
listener = socket.socket(socket.AF_UNIX)
listener.bind(path)
listener.listen(16)
sys.stdout.write("ready\n"); sys.stdout.flush()

def receive(conn):
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    (size,) = struct.unpack("!Q", data[:8])
    data = data[8:]
    while len(data) < size:
        more = conn.recv(size - len(data))
        if not more:
            raise EOFError
        data += more
    return json.loads(data), fds

def run(job, fds, conn):
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    listener.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    extra = [p for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    script = job.get("script")
    # as the console script (its own folder first) or `python -m` (the working folder first) builds it
    sys.path[:] = [os.path.dirname(script) if script else job["cwd"], *extra, *base]
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "rb", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "wb", closefd=False), encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "wb", closefd=False), encoding="utf-8", write_through=True)
    sys.argv = [script or "-m", *job["args"]]
    code = 0
    try:
        if script:
            from nbinspect.ui.cli import main
            sys.exit(main())
        runpy.run_module("nbinspect", run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush(); sys.stderr.flush()
        conn.sendall(str(code).encode())
    finally:
        os._exit(code)

while True:
    conn, _ = listener.accept()
    try:
        job, fds = receive(conn)
    except Exception:
        conn.close()
        continue
    if os.fork() == 0:
        run(job, fds, conn)
    for fd in fds:
        os.close(fd)
    conn.close()
"""

_CLIENT = r"""#!{python} -S
# `nbinspect` for tests: runs the command in a child of the preloaded server at {socket!r}
# (tests/support/cli_server.py), or as {fallback} when there is none.
import json, os, socket, struct, sys
args, script = sys.argv[1:], {script!r}
sock = socket.socket(socket.AF_UNIX)
try:
    sock.connect({socket!r})
except OSError:
    os.execv(*((script, [script, *args]) if script else ({python!r}, [{python!r}, "-m", "nbinspect", *args])))
job = json.dumps({{"args": args, "cwd": os.getcwd(), "env": dict(os.environ), "script": script}}).encode()
socket.send_fds(sock, [struct.pack("!Q", len(job)) + job], [0, 1, 2])
reply = b""
while True:
    more = sock.recv(16)
    if not more:
        break
    reply += more
sys.exit(int(reply) if reply else 70)  # 70: the child died without a status (EX_SOFTWARE)
"""


def client_script(sock: Path, python: str = sys.executable, script: Path | None = None) -> str:
    """The text of an executable `nbinspect` that runs in the server listening at `sock`:
    as `script` (the installed console script) runs, or else as ``python -m nbinspect``."""
    fallback = str(script) if script else "python -m nbinspect"
    return _CLIENT.format(python=python, socket=str(sock), script=str(script) if script else None, fallback=fallback)


class CliServer:
    """The preloaded server, listening on ``folder/nbinspect.sock``, started with `env`
    (the environment the commands' imports see: thread counts, caches, PYTHONPATH)."""

    def __init__(self, folder: Path, env: dict[str, str]):
        self.socket = folder / "nbinspect.sock"
        self.env = env
        self._process: subprocess.Popen | None = None

    def start(self) -> None:
        if self._process is not None:
            return
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(self.socket), ",".join(PRELOAD)],
            stdout=subprocess.PIPE,
            text=True,
            env=self.env,
            cwd=self.socket.parent,
        )
        assert self._process.stdout is not None
        if self._process.stdout.readline().strip() != "ready":
            raise RuntimeError("the nbinspect test server did not start")

    def stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(timeout=30)
            self._process = None
        self.socket.unlink(missing_ok=True)


INSTALLED = Path(sys.executable).with_name("nbinspect")  # the console script `pip install -e .` made
_shared: tuple[CliServer, Path] | None = None


def console_script() -> Path:
    """A stand-in for the installed `nbinspect` console script, for `subprocess.run`: each
    call a process of its own that runs :data:`INSTALLED`'s code with its `sys.path`, from
    one server per test process (started at the first call, stopped at exit)."""
    global _shared
    if _shared is None:
        folder = Path(tempfile.mkdtemp(prefix="nbi-cli-"))
        server = CliServer(folder, dict(os.environ))
        server.start()
        client = folder / "nbinspect"
        client.write_text(client_script(server.socket, sys.executable, INSTALLED))
        client.chmod(0o755)
        atexit.register(lambda: (server.stop(), shutil.rmtree(folder, ignore_errors=True)))
        _shared = (server, client)
    return _shared[1]
