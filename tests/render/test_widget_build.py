"""The wheel carries the front-end bundle: built from a checkout without one, the build hook
runs npm and the wheel contains nbinspect/static/widget.js."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if (ROOT / line).is_file()]


@pytest.mark.skipif(shutil.which("npm") is None, reason="building the front-end needs npm")
def test_wheel_from_a_checkout_builds_and_ships_the_bundle(tmp_path):
    src = tmp_path / "src"
    for rel in tracked_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    assert not (src / "nbinspect/static/widget.js").exists()
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(dist), str(src)],
        check=True,
        timeout=600,
    )
    (wheel,) = dist.glob("nbinspect-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        bundle = z.read("nbinspect/static/widget.js").decode()
    assert "nbinspect/render/widget.py" in names
    assert "export" in bundle and "treegrid" in bundle
    assert not any("node_modules" in n for n in names)
