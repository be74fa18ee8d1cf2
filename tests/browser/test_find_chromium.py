"""`make test`'s first step, `python -m tests.support.chromium ensure`, on machines without
a Chromium: the script runs for real with PATH, the system locations, playwright's cache
and the installers pointed at a scratch folder (the system's chromium stays installed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path):
    """A machine without Chromium: empty system locations, an empty playwright cache, a PATH
    holding only the fake installers a test puts there; installers log their arguments."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    log = tmp_path / "installs.log"
    env = {
        "PATH": str(bin_),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "NBINSPECT_CHROMIUM_CANDIDATES": str(tmp_path / "system" / "chromium"),
        "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "ms-playwright"),
        "NBINSPECT_ASSUME_ROOT": "0",
        "NBINSPECT_PLAYWRIGHT": str(_script(tmp_path / "playwright", f'echo "playwright $*" >> {log}; exit 1')),
    }

    def run(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "tests.support.chromium", "ensure"],
            env={**env, **extra},
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def installs() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    return tmp_path, run, installs, log


def test_without_chromium_or_root_it_tries_playwright_then_says_what_to_run(machine):
    _, run, installs, _ = machine
    done = run()
    assert done.returncode == 1 and done.stdout == ""
    assert installs() == ["playwright install chromium"]  # no apt without root
    last = done.stderr.strip().splitlines()[-1]
    assert "apt-get install -y chromium" in last and "-m playwright install chromium" in last
    assert "make test" in last


def test_as_root_with_apt_it_installs_debians_chromium(machine):
    tmp, run, installs, log = machine
    system = tmp / "system" / "chromium"
    system.parent.mkdir()
    # apt-get that "installs" chromium where Debian puts it, chatting on stdout as the real one does
    _script(
        tmp / "bin" / "apt-get",
        f'echo "apt-get $*" >> {log}; echo "Reading package lists..."\n'
        f'if [ "$1" = install ]; then printf "#!/bin/sh\\n" > {system}; /bin/chmod +x {system}; fi',
    )
    done = run(NBINSPECT_ASSUME_ROOT="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{system}\n"  # make test reads the path from stdout: the installer's chatter goes to stderr
    assert "Reading package lists..." in done.stderr
    assert installs() == ["apt-get update", "apt-get install -y chromium"]  # playwright not needed


def test_when_apt_fails_playwrights_download_is_used(machine):
    tmp, run, installs, log = machine
    _script(tmp / "bin" / "apt-get", f'echo "apt-get $*" >> {log}; exit 100')
    # where playwright's download would put it (asked in a child: this process may hold a playwright already)
    where = "from playwright.sync_api import sync_playwright\nwith sync_playwright() as p: print(p.chromium.executable_path)"
    env = {**os.environ, "PLAYWRIGHT_BROWSERS_PATH": str(tmp / "ms-playwright")}
    asked = subprocess.run([sys.executable, "-c", where], env=env, capture_output=True, text=True, check=True)
    expected = Path(asked.stdout.strip())
    fake = _script(
        tmp / "playwright-ok",
        f'echo "playwright $*" >> {log}; echo "Downloading Chromium"; /bin/mkdir -p {expected.parent}; '
        f'printf "#!/bin/sh\\n" > {expected}; /bin/chmod +x {expected}',
    )
    done = run(NBINSPECT_ASSUME_ROOT="1", NBINSPECT_PLAYWRIGHT=str(fake))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{expected}\n"
    assert installs() == ["apt-get update", "playwright install chromium"]


def test_a_chromium_already_there_is_used_and_nothing_installed(machine):
    tmp, run, installs, _ = machine
    system = _script(tmp / "chromium", "exit 0")
    done = run(NBINSPECT_CHROMIUM_CANDIDATES=f"{tmp / 'missing'}:{system}")
    assert done.returncode == 0 and done.stdout == f"{system}\n"
    assert installs() == []
