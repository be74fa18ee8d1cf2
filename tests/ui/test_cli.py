"""The real `nbinspect` command, run in a subprocess: output, files written, exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from nbinspect import examples
from tests.support.cli_server import INSTALLED, console_script


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed command's code in a process of its own (forked from a server that has
    imported torch: tests/support/cli_server.py)."""
    return subprocess.run(
        [str(console_script()), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cli")
    model = examples.build("tiny_lm")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    torch.save(
        {"model_state_dict": model.state_dict(), "optimizer_state_dict": opt.state_dict(), "epoch": 4},
        root / "train.pt",
    )
    other = examples.build("tiny_lm", seed=1).state_dict()
    save_file({k: v.clone() for k, v in other.items() if k != "lm_head.weight"}, root / "other.safetensors")
    (root / "cfg.yaml").write_text("vocab_size: 256\nn_layer: 2\n")
    (root / "mymodels.py").write_text(
        "from nbinspect.examples import TinyLM\n\ndef build(**kw):\n    return TinyLM(**kw)\n"
    )
    return root


def test_command_is_installed():
    assert INSTALLED.exists(), "pip install -e . creates the console script"


def test_inspect_checkpoint(files):
    r = run("inspect", files / "train.pt", "--depth", "1")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("train.pt (torch)\n")
    assert "Parameters         118,528" in out  # tied embedding/head counted once
    assert "├─ blocks   unknown   99,968" in out
    assert "epoch                 4" in out and "optimizer state: 1 param group(s)" in out
    assert "Training memory plan" in out and "optimizer_state  926.1 KiB" in out
    assert r.stderr == ""


def test_inspect_with_model_config_and_input(files, tmp_path):
    r = run(
        "inspect", files / "train.pt", "--model", "mymodels:build", "--config", files / "cfg.yaml",
        "--input-shape", "2,16", "--input-dtype", "int64", "--batch-size", "8",
        "--json", tmp_path / "o.json", "--html", tmp_path / "o.html", cwd=files,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Linear                           9  99,456" in out  # parameters by module type, types known
    assert "Loaded 29 tensors; every key matched" in out
    assert "activations" in out and "at batch 8" in out
    assert "forward pass: 25 module calls" in out
    doc = json.loads((tmp_path / "o.json").read_text())
    assert doc["totals"]["total_params"] == 118_528
    assert (tmp_path / "o.html").read_text().lstrip().lower().startswith("<!doctype html")


def test_inspect_verbose_lists_every_tensor(files):
    r = run("inspect", files / "other.safetensors", "--verbose")
    assert r.returncode == 0, r.stderr
    assert "Tensors (28)" in r.stdout
    assert re.search(r"\ntok_emb\.weight +\[256, 64\] +float32 +16,384 +64\.0 KiB\n", r.stdout)
    assert "Layers (all levels)" in r.stdout


def test_compare(files, tmp_path):
    r = run(
        "compare",
        files / "train.pt",
        files / "other.safetensors",
        "--top",
        "3",
        "--by",
        "layer",
        "--json",
        tmp_path / "c.json",
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert out.startswith("Compare train.pt -> other.safetensors\n")
    # lm_head.weight is tied to tok_emb.weight in train.pt; the safetensors file stores the tie once
    assert "28 tensors: 18 changed, 10 same\n" in out and "Removed" not in out
    assert "By component" in out and "By layer" in out
    doc = json.loads((tmp_path / "c.json").read_text())
    assert len(doc["tensors"]) == 28 and doc["modules"][0]["group"] == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["inspect", "missing.pt"], "nbinspect: error: missing.pt: no such file or folder"),
        (["compare", "train.pt", "cfg.yaml"], "not a checkpoint format nbinspect reads"),
        (["inspect", "train.pt", "--model", "mymodels:nope"], "has no attribute 'nope'"),
        (
            ["inspect", "train.pt", "--model", "mymodels:build", "--input-shape", "2,16"],
            "forward failed in tok_emb (Embedding)",
        ),
    ],
)
def test_errors_are_one_line_with_exit_code_1(files, args, message):
    r = run(*args, cwd=files)
    assert r.returncode == 1
    assert r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("nbinspect: error: ") and message in r.stderr


def test_refused_pickle_exit_code_and_trust(files, tmp_path):
    (tmp_path / "evil.py").write_text("class Config:\n    pass\n")
    code = (
        "import torch, sys; sys.path.insert(0, '.'); import evil; "
        "torch.save({'w': torch.ones(2), 'cfg': evil.Config()}, 'evil.pt')"
    )
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
    r = run("inspect", "evil.pt", cwd=tmp_path)
    assert r.returncode == 1 and "evil.Config" in r.stderr and "--trust" in r.stderr
    r = run("inspect", "evil.pt", "--trust", cwd=tmp_path)
    # trusted: torch.load runs the file's code, its class found as `python -m` finds modules (the working directory)
    assert r.returncode == 0 and re.search(r"(?m)^cfg +Config$", r.stdout), r.stderr
    (tmp_path / "evil.py").unlink()
    r = run("inspect", "evil.pt", "--trust", cwd=tmp_path)
    assert r.returncode == 1 and "No module named 'evil'" in r.stderr  # trusted, but its class must be importable


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["inspect"],
        ["inspect", "x.pt", "--depth", "two"],
        ["inspect", "x.pt", "--config", "c.yaml"],
        ["frobnicate"],
        ["compare", "a.pt"],
    ],
)
def test_usage_errors_exit_2(args):
    r = run(*args)
    assert r.returncode == 2 and "usage: nbinspect" in r.stderr


def test_demo_still_works():
    r = run("demo", "--model", "mlp", "--depth", "1")
    assert r.returncode == 0 and r.stdout.startswith("MLP (torch)")


def test_a_dtype_hint_names_the_commands_own_option(files):
    r = run(
        "inspect", files / "train.pt", "--model", "mymodels:build", "--config", files / "cfg.yaml",
        "--input-shape", "2,16", cwd=files,
    )  # fmt: skip
    assert r.returncode == 1
    assert "add --input-dtype int64 for token ids" in r.stderr and "input_dtype=" not in r.stderr


def test_the_working_directory_is_importable_only_when_user_code_may_be_built(files, tmp_path, monkeypatch, capsys):
    """A downloaded folder's `yaml.py` or `numba.py` must not stand in for a module nbinspect
    imports later: the working directory goes on the import path only with --model, a config
    alone, --trust, or a project trust list ([tool.nbinspect] trust once approved, NBINSPECT_TRUST)."""
    from nbinspect.ui.cli import main

    monkeypatch.delenv("NBINSPECT_TRUST", raising=False)
    monkeypatch.chdir(tmp_path)
    from nbinspect.io.project_trust import trust_project

    for args, project, importable in [
        (["inspect", str(files / "train.pt")], None, False),
        (["inspect", str(files / "train.pt"), "--trust"], None, True),
        (["inspect", str(files / "train.pt")], "listed", False),  # a list not approved is inert
        (["inspect", str(files / "train.pt")], "approved", True),
    ]:
        monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path)])
        if project:
            (tmp_path / "pyproject.toml").write_text('[tool.nbinspect]\ntrust = ["mymodels"]\n')
        if project == "approved":
            trust_project(tmp_path)
        assert main(args) == 0
        assert (str(tmp_path) in sys.path) is importable, args
    capsys.readouterr()


def test_a_cloned_folder_cannot_trust_its_own_code(tmp_path):
    """A folder ships pyproject.toml trusting its `evil` module and a config naming it; running
    nbinspect inside it runs nothing until the user approves the list (`nbinspect trust`),
    and nothing again once the approval is revoked. The approvals live under XDG_CONFIG_HOME
    (a temporary folder here, set for every test by tests/conftest.py)."""
    clone = tmp_path / "clone"
    clone.mkdir()
    canary = tmp_path / "canary"
    (clone / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.nbinspect]\ntrust = ["evil"]\n')
    (clone / "evil.py").write_text(
        "import pathlib, torch\n\n"
        f"def build(**kw):\n    pathlib.Path({str(canary)!r}).write_text('ran')\n    return torch.nn.Linear(**kw)\n"
    )
    (clone / "cfg.yaml").write_text("model:\n  _target_: evil.build\n  in_features: 4\n  out_features: 3\n")

    r = run("inspect", "--config", "cfg.yaml", cwd=clone)
    assert r.returncode == 1 and not canary.exists()
    assert r.stderr.strip().splitlines() == [
        "nbinspect: error: cfg.yaml, section 'model': names its factory 'evil:build'; "
        f"{clone / 'pyproject.toml'} lists trusted factories but they are not approved: "
        f"run `nbinspect trust` in {clone} to approve them"
    ]

    r = run("trust", cwd=clone)
    assert r.returncode == 0 and "approved" in r.stdout and "evil" in r.stdout, r.stderr
    r = run("inspect", "--config", "cfg.yaml", cwd=clone)
    assert r.returncode == 0 and canary.read_text() == "ran", r.stderr
    assert re.search(r"(?m)^Parameters +15 ", r.stdout), r.stdout  # 4 * 3 weights + 3 biases
    assert str(clone / "pyproject.toml") in run("trust", "--list").stdout

    canary.unlink()
    assert run("trust", "--revoke", cwd=clone).returncode == 0
    assert run("trust", "--list").stdout.strip() == "no approvals"
    r = run("inspect", "--config", "cfg.yaml", cwd=clone)
    assert r.returncode == 1 and not canary.exists() and "not approved" in r.stderr
