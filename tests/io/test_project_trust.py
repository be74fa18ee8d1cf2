"""A project trusts its own factories once ([tool.nbinspect] trust in pyproject.toml, approved
by the user with `nbinspect trust`, or NBINSPECT_TRUST): a config or checkpoint naming one of
them builds without --trust; anything else a file names is still refused (issue 25's rule),
and only the user's own pyproject.toml above the working directory counts. The approvals
file lives under XDG_CONFIG_HOME, a fresh temporary folder for every test (tests/conftest.py)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings

import pytest
import torch
import yaml

from nbinspect.config_inspection import from_config
from nbinspect.errors import CheckpointError, UnsafeCheckpointError
from nbinspect.io.checkpoint import load_checkpoint
from nbinspect.io.project_trust import ENV_VAR, project_trust, trust_project
from nbinspect.io.trust_approvals import approvals, approvals_path, list_digest


@pytest.fixture(autouse=True)
def _no_env_trust(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)


def _config(folder, target="torch.nn.Linear"):
    data = {"model": {"_target_": target, "in_features": 4, "out_features": 3}, "data": {"batch_size": 8}}
    path = folder / "default.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _pyproject(folder, trust):
    path = folder / "pyproject.toml"
    path.write_text(f'[project]\nname = "p"\n\n[tool.nbinspect]\ntrust = {trust!r}\n'.replace("'", '"'))
    return path


def _approved(folder, trust):
    path = _pyproject(folder, trust)
    trust_project(folder)
    return path


def test_a_config_naming_a_factory_the_project_trusts_builds(tmp_path, monkeypatch):
    config = _config(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnsafeCheckpointError, match=r"names its factory 'torch\.nn:Linear'.*\[tool\.nbinspect\]"):
        from_config(config=config)
    _pyproject(tmp_path, ["torch.nn"])
    with pytest.raises(UnsafeCheckpointError, match=r"not approved: run `nbinspect trust` in "):
        from_config(config=config)
    trust_project(tmp_path)
    insp = from_config(config=config)
    assert insp.totals["total_params"] == 4 * 3 + 3
    assert "trusted by" in insp.metadata["model"] and "pyproject.toml" in insp.metadata["model"]


@pytest.mark.parametrize(
    ("entries", "trusted"),
    [
        (["torch.nn"], True),
        (["torch.nn.Linear"], True),
        (["torch.nn:Linear"], True),
        (["torch"], True),
        (["torch.nnx"], False),  # a prefix only at a dot
        (["torch.nn.Conv2d"], False),
        (["models"], False),
        ([], False),
    ],
)
def test_an_entry_covers_a_module_and_what_is_inside_it(tmp_path, monkeypatch, entries, trusted):
    _approved(tmp_path, entries)
    monkeypatch.chdir(tmp_path)
    assert (project_trust().covers("torch.nn:Linear") is not None) is trusted
    assert (project_trust().covers("torch.nn.Linear") is not None) is trusted


def test_the_environment_variable_trusts_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(ENV_VAR, "models, torch.nn.Linear")
    assert project_trust().covers("torch.nn:Linear") == ENV_VAR
    assert project_trust().covers("os:system") is None
    assert from_config(config=_config(tmp_path)).totals["total_params"] == 15


def test_only_the_pyproject_above_the_working_directory_counts(tmp_path, monkeypatch):
    downloaded = tmp_path / "downloaded"
    downloaded.mkdir()
    config = _config(downloaded, "os.system")
    _pyproject(downloaded, ["os"])  # a folder cannot trust itself: it is not where we run
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    with pytest.raises(UnsafeCheckpointError, match="Nothing was run"):
        from_config(config=config)
    # the nearest pyproject.toml is the project: a parent's trust does not reach into it
    _approved(tmp_path, ["torch.nn"])
    (work / "pyproject.toml").write_text('[project]\nname = "w"\n')
    assert project_trust().covers("torch.nn:Linear") is None
    (work / "pyproject.toml").unlink()
    assert project_trust().covers("torch.nn:Linear") is not None


def test_a_pyproject_others_may_write_trusts_nothing(tmp_path, monkeypatch):
    path = _approved(tmp_path, ["torch.nn"])
    monkeypatch.chdir(tmp_path)
    assert project_trust().covers("torch.nn:Linear") is not None
    os.chmod(path, 0o666)
    assert project_trust().covers("torch.nn:Linear") is None


@pytest.mark.parametrize("entries", [["*"], ["os; rm"], "models"])
def test_a_malformed_trust_entry_is_one_line(tmp_path, monkeypatch, entries):
    _pyproject(tmp_path, entries)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError, match=r"pyproject\.toml \[tool\.nbinspect\]: trust"):
        project_trust()


def test_a_checkpoint_naming_a_trusted_factory_in_its_model_section_is_built(tmp_path, monkeypatch):
    linear = torch.nn.Linear(4, 3)
    config = {"model": {"_target_": "torch.nn.Linear", "in_features": 4, "out_features": 3}, "data": {"n": 1}}
    path = tmp_path / "best.pt"
    torch.save({"model_state_dict": linear.state_dict(), "config": config, "norm": {"mean": [0.5, 1.5]}}, path)
    monkeypatch.chdir(tmp_path)
    untrusted = load_checkpoint(path)
    assert untrusted.model is None and "[tool.nbinspect] trust" in untrusted.metadata["model"]
    _pyproject(tmp_path, ["torch.nn"])
    unapproved = load_checkpoint(path)
    assert unapproved.model is None and "not approved: run `nbinspect trust`" in unapproved.metadata["model"]
    trust_project(tmp_path)
    source = load_checkpoint(path)
    assert type(source.model) is torch.nn.Linear
    weight = next(t for t in source.tensors if t.name == "weight")  # on meta, the file's values attached
    assert torch.equal(weight.values(), linear.weight.detach())
    assert source.metadata["norm"] == {"mean": [0.5, 1.5]}  # plain data beside the weights, shown as it is


def test_an_unapproved_list_trusts_nothing_and_says_what_to_run(tmp_path, monkeypatch):
    pyproject = _pyproject(tmp_path, ["torch.nn"])
    monkeypatch.chdir(tmp_path)
    trust = project_trust()
    assert trust.covers("torch.nn:Linear") is None and trust.entries == ()
    assert trust.unapproved_note("torch.nn:Linear") == (
        f"{pyproject} lists trusted factories but they are not approved: run `nbinspect trust` in {tmp_path} "
        "to approve them"
    )
    assert trust.unapproved_note("os:system") is None  # the list would not have mattered: the usual refusal
    with pytest.raises(UnsafeCheckpointError, match="needs trust=True"):
        from_config(config=_config(tmp_path, "os.system"))


def test_the_approval_is_the_path_and_a_digest_of_the_list_in_a_private_file(tmp_path, monkeypatch):
    pyproject = _pyproject(tmp_path, ["torch.nn", "models"])
    monkeypatch.chdir(tmp_path)
    assert trust_project() == (pyproject, ["torch.nn", "models"])
    path = approvals_path()
    assert str(path).startswith(os.environ["XDG_CONFIG_HOME"])  # never the real ~/.config in tests
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    stored = json.loads(path.read_text())["approved"][str(pyproject.resolve())]
    assert stored == {"sha256": list_digest(["torch.nn", "models"]), "trust": ["torch.nn", "models"]}
    assert stored["sha256"] == hashlib.sha256(b'["torch.nn", "models"]').hexdigest()  # an independent digest
    assert os.listdir(path.parent) == ["trusted.json"]  # written atomically, no temporary left


def test_editing_the_list_needs_a_new_approval(tmp_path, monkeypatch):
    _approved(tmp_path, ["torch.nn"])
    monkeypatch.chdir(tmp_path)
    assert project_trust().covers("torch.nn:Linear") is not None
    _pyproject(tmp_path, ["torch.nn", "os"])  # the project adds an entry after the approval
    assert project_trust().covers("os:system") is None and project_trust().covers("torch.nn:Linear") is None
    assert project_trust().unapproved_note("os:system") is not None
    trust_project(tmp_path)
    assert project_trust().covers("os:system") is not None


def test_revoking_withdraws_the_approval(tmp_path, monkeypatch):
    pyproject = _approved(tmp_path, ["torch.nn"])
    other = tmp_path / "other"
    other.mkdir()
    _approved(other, ["models"])
    monkeypatch.chdir(tmp_path)
    assert project_trust().covers("torch.nn:Linear") is not None
    trust_project(revoke=True)
    assert project_trust().covers("torch.nn:Linear") is None
    assert list(approvals()) == [str(other / "pyproject.toml")]  # the other project's approval stays
    assert str(pyproject) not in approvals()


def test_nothing_to_approve_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n')
    with pytest.raises(CheckpointError, match=r"^no pyproject\.toml with a \[tool\.nbinspect\] trust list"):
        trust_project(tmp_path)


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe",
        b'["a list"]',
        b'{"version": 1, "approved": {"/p/pyproject.toml": {"sha256": 5}}}',
        b'{"approved": {}}' + b" " * (1 << 20),  # over the size limit
    ],
)
def test_a_corrupt_approvals_file_approves_nothing_with_one_warning(tmp_path, monkeypatch, content):
    _approved(tmp_path, ["torch.nn"])
    monkeypatch.chdir(tmp_path)
    approvals_path().write_bytes(content)
    with pytest.warns(UserWarning, match="no project trust list is approved") as caught:
        trust = project_trust()
    assert trust.covers("torch.nn:Linear") is None and trust.unapproved_note("torch.nn:Linear") is not None
    assert len(caught) == 1 and str(approvals_path()) in str(caught[0].message)
    assert "no project trust list is approved" in str(caught[0].message)
    assert "\n" not in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trust_project(tmp_path)  # approving again replaces the broken file
    assert project_trust().covers("torch.nn:Linear") is not None
