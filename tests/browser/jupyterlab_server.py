"""One JupyterLab server for a test session: temp root, settings, config and runtime
directories, a known token, a free port; stopped in `finally`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TOKEN = "nbinspect-test-token"
# No news or update toast popping over the notebook.
_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False}
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def trust(root: Path, notebook: Path) -> None:
    """Sign `notebook` as its author's JupyterLab does on save: it opens trusted (its HTML
    outputs' scripts run) in the server started by :func:`jupyterlab` on `root`."""
    import nbformat
    from nbformat.sign import NotebookNotary

    data = root.parent / "jupyter-home" / "data"
    data.mkdir(parents=True, exist_ok=True)
    notary = NotebookNotary(data_dir=str(data))
    nb = nbformat.read(notebook, as_version=4)
    notary.sign(nb)


@contextmanager
def jupyterlab(root: Path, timeout: float = 90, app: str = "lab") -> Iterator[str]:
    """Start `jupyter lab` (or `app="notebook"`: Notebook 7) serving `root`; yields its base
    URL. Notebooks signed with :func:`trust` (same `root`) open trusted."""
    home = root.parent / "jupyter-home"
    settings = home / "settings"
    for rel, content in _SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(content))
    port = _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(home / "config"),
        "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
        "JUPYTER_DATA_DIR": str(home / "data"),  # the notebook signatures (trust) live here
        "IPYTHONDIR": str(home / "ipython"),
        "JUPYTER_PLATFORM_DIRS": "1",
    }
    log = open(home / "server.log", "w")  # noqa: SIM115 (the server writes it until the finally below closes it)
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        app,
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={TOKEN}",
        "--ServerApp.password=",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={home / 'workspaces'}",
        "--LabApp.news_url=",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: tests switch the theme through it
        "--ServerApp.allow_root=True",
    ]
    if app == "notebook":  # Notebook 7 takes the same settings under its own name
        cmd = [c.replace("--LabApp.", "--JupyterNotebookApp.") for c in cmd if not c.startswith("--LabApp.news_url")]
    server = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"jupyter lab exited: {(home / 'server.log').read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"jupyter lab did not start: {(home / 'server.log').read_text()[-3000:]}")
            time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
