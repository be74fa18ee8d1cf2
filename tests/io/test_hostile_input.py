"""Every input is validated where it enters: the command line's options are usage errors
(exit 2) when they cannot be right, its stderr holds one line on failure and nothing else;
the magic turns a path it cannot write into a one-line UsageError."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from safetensors.torch import save_file

from nbinspect import examples
from nbinspect.ui.cli import main

from ..hostile_support import ROOT

COMMAND = [sys.executable, "-m", "nbinspect"]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([*COMMAND, *map(str, args)], capture_output=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile_cli")
    save_file({k: v.contiguous() for k, v in examples.build("mlp").state_dict().items()}, root / "a.safetensors")
    return root / "a.safetensors"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "{ckpt}", "--batch-size", "0"], "--batch-size: expected an integer of at least 1, got '0'"),
        (["inspect", "{ckpt}", "--batch-size", "-3"], "--batch-size: expected an integer of at least 1"),
        (["inspect", "{ckpt}", "--depth", "-1"], "--depth: expected an integer of at least 0, got '-1'"),
        (
            ["inspect", "{ckpt}", "--model", "m:f", "--input-shape", "2,,3"],
            "'2,,3' is not a comma-separated list of integers, e.g. 1,3,224,224",
        ),
        (["inspect", "{ckpt}", "--model", "m:f", "--input-shape", "2,3,"], "'2,3,' is not a comma-separated list"),
        (["inspect", "{ckpt}", "--model", "m:f", "--input-shape", "2,-3"], "'2,-3' is not a comma-separated list"),
        (["inspect", "{ckpt}", "--model", "m:f", "--input-shape", ""], "'' is not a comma-separated list"),
        (["compare", "{ckpt}", "{ckpt}", "--thresholds", "nan,-1"], "expected positive numbers like 1e-8"),
        (["compare", "{ckpt}", "{ckpt}", "--thresholds", "1e-8,inf"], "got '1e-8,inf'"),
        (["compare", "{ckpt}", "{ckpt}", "--thresholds", "0"], "got '0'"),
        (["compare", "{ckpt}", "{ckpt}", "--top", "-2"], "--top: expected an integer of at least 0"),
    ],
)
def test_options_that_cannot_be_right_are_usage_errors(ckpt, args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main([a.format(ckpt=ckpt) for a in args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_failure_is_one_error_line_and_nothing_else(tmp_path):
    (tmp_path / "junk.pt").write_bytes(b"\x80\x04\x95" + b"\xff" * 64)  # a damaged pickle: torch warns, then fails
    r = run("inspect", tmp_path / "junk.pt")
    assert r.returncode == 1
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nbinspect: error: {tmp_path / 'junk.pt'}: "), r.stderr
    os.mkfifo(tmp_path / "fifo.pt")
    r = run("inspect", tmp_path / "fifo.pt")
    assert r.returncode == 1
    assert (
        r.stderr.decode()
        == f"nbinspect: error: {tmp_path / 'fifo.pt'}: is a FIFO (named pipe), not a checkpoint file\n"
    )


def test_success_leaves_stderr_empty(ckpt, tmp_path):
    big = tmp_path / "big.safetensors"  # enough data that a progress bar would have something to show
    save_file({"w": torch.zeros(2**22)}, big)
    r = run("inspect", big, "--json", tmp_path / "o.json")
    assert r.returncode == 0 and r.stderr == b""


def test_file_names_that_are_not_utf8(tmp_path):
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/m\xff"))
    folder.mkdir()
    save_file({"w": torch.ones(2)}, folder / "a.safetensors")
    html = Path(os.fsdecode(bytes(tmp_path) + b"/out\xfe.html"))
    r = run("inspect", folder, "--html", html, "--json", tmp_path / "o.json")
    assert r.returncode == 0, r.stderr
    assert r.stdout.decode().startswith("m\\xff (torch)")
    assert "m\\xff" in html.read_text(encoding="utf-8")
    bad = Path(os.fsdecode(bytes(tmp_path) + b"/bad\xfe.pt"))
    bad.write_bytes(b"nope")
    r = run("inspect", bad)
    assert r.returncode == 1
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"nbinspect: error: {tmp_path}/bad\\xfe.pt: not a checkpoint format nbinspect reads")


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbinspect")
    shell.run_cell("from nbinspect import examples; net = examples.build('mlp')")
    yield shell
    InteractiveShell.clear_instance()


@pytest.mark.parametrize("flag", ["--json", "--html"])
def test_magic_unwritable_output_is_a_usage_error(ip, tmp_path, flag):
    for target, reason in ((tmp_path, "Is a directory"), (tmp_path / "missing" / "x", "No such file or directory")):
        with pytest.raises(UsageError) as info:
            ip.run_line_magic("inspect_model", f"net --no-stats --text {flag} {target}")
        text = str(info.value)
        assert "\n" not in text
        assert text == f"%inspect_model: {flag} '{target}': cannot write there ({reason})"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("net --batch-size 0", "--batch-size: expected an integer of at least 1, got '0'"),
        ("net --depth -1", "--depth: expected an integer of at least 0, got '-1'"),
        ("net --input-shape 2,,3", "--input-shape: '2,,3' is not a comma-separated list of integers"),
        ("net --bins 0", "--bins: expected an integer of at least 1, got '0'"),
    ],
)
def test_magic_validates_its_options(ip, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("inspect_model", line)
