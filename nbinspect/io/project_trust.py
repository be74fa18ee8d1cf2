"""The factories a project trusts: the user's one opt-in for the model code its files name.

Issue 25's rule: code a file names (a config's ``_target_``, a checkpoint's recorded
factory) is imported and called only with ``trust=True`` (``--trust``). A project whose
configs name its own model classes says so once instead of on every command::

    [tool.nbinspect]
    trust = ["models", "mypkg.nets:build"]

in the ``pyproject.toml`` nearest above the working directory, or in the environment:
``NBINSPECT_TRUST=models,mypkg.nets:build``. An entry is a module (it and everything inside
it) or one ``module:attr``; a factory a file names is called when its dotted path is an
entry or lies inside one, so a config naming ``os:system`` is still refused unless someone
listed ``os``. Nothing else is trusted by it: a pickle still runs no code without
``trust=True``. The environment variable is the user's own word and counts at once; a
``pyproject.toml`` list counts only once the user approved it with ``nbinspect trust``
(:mod:`.trust_approvals`), since a cloned or downloaded folder ships its own pyproject.toml
and running nbinspect inside it must not run its code. The file is found from the working
directory, never from the file being read, and only when the user owns it and no one else
may write it.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import CheckpointError, first_line
from ..terminal import safe_text
from .files import FileHandle
from .text import read_text
from .trust_approvals import is_approved, record, remove

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the tomli dependency of Python 3.10
    import tomli as tomllib

__all__ = ["ENV_VAR", "ProjectTrust", "project_trust", "trust_project"]

ENV_VAR = "NBINSPECT_TRUST"
PYPROJECT = "pyproject.toml"
MAX_PYPROJECT_BYTES = 1 << 20
_ENTRY = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)?")


@dataclass(frozen=True)
class ProjectTrust:
    """The trusted entries (dotted: ``models``, ``mypkg.nets.build``) and where they were said."""

    entries: tuple[tuple[str, str], ...] = ()  # (dotted entry, where: "NBINSPECT_TRUST" or the pyproject path)
    unapproved: tuple[tuple[str, str], ...] = ()  # a pyproject list the user has not approved: inert

    def covers(self, spec: str) -> str | None:
        """Where `spec` (``pkg.module:attr`` or dotted) is trusted, or None."""
        dotted = spec.replace(":", ".")
        for entry, where in self.entries:
            if dotted == entry or dotted.startswith(entry + "."):
                return where
        return None

    def unapproved_note(self, spec: str) -> str | None:
        """The one line to show when `spec` would be trusted by a list not yet approved."""
        where = ProjectTrust(self.unapproved).covers(spec)
        if where is None:
            return None
        pyproject = Path(where.removesuffix(" [tool.nbinspect]"))
        return (
            f"{pyproject} lists trusted factories but they are not approved: "
            f"run `nbinspect trust` in {pyproject.parent} to approve them"
        )


def _entries(values: object, where: str) -> list[tuple[str, str]]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise CheckpointError(f'{where}: trust must be a list of module paths, like ["models"]')
    for value in values:
        if not _ENTRY.fullmatch(value):
            raise CheckpointError(
                f"{where}: trust entry {safe_text(value, 80)!r} is not a module path "
                "(like 'models' or 'pkg.nets:build')"
            )
    return [(v.replace(":", "."), where) for v in values]


def _yours(path: Path) -> bool:
    """Whether `path` is the user's word: owned by them and writable by no one else (so a
    ``/tmp/pyproject.toml`` someone else planted trusts nothing, as git's safe.directory)."""
    st = path.stat()
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def _pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / PYPROJECT).is_file():
            return folder / PYPROJECT if _yours(folder / PYPROJECT) else None
    return None


def _project_list(start: str | os.PathLike | None) -> tuple[Path, list[str]] | None:
    """The nearest pyproject.toml at or above `start` (default: the working directory) and its
    trust list as written, if it has one."""
    path = _pyproject(Path(start if start is not None else os.getcwd()).resolve())
    if path is None:
        return None
    handle = FileHandle.open(path)
    try:
        text = read_text(handle, MAX_PYPROJECT_BYTES, PYPROJECT)
    finally:
        handle.close()
    try:
        tool = tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError as exc:
        raise CheckpointError(f"{path}: not valid TOML ({first_line(exc)})") from None
    settings = tool.get("nbinspect", {}) if isinstance(tool, dict) else {}
    if not isinstance(settings, dict) or "trust" not in settings:
        return None
    values = settings["trust"]
    _entries(values, f"{path} [tool.nbinspect]")  # a malformed list is one error line
    return path, values


def project_trust(start: str | os.PathLike | None = None) -> ProjectTrust:
    """The entries of ``$NBINSPECT_TRUST`` and, once approved (``nbinspect trust``), of
    ``[tool.nbinspect] trust`` in the nearest ``pyproject.toml`` at or above `start`
    (default: the working directory)."""
    env = os.environ.get(ENV_VAR, "")
    found = _entries([v.strip() for v in re.split(r"[,\s]+", env) if v.strip()], ENV_VAR)
    listed = _project_list(start)
    if listed is None:
        return ProjectTrust(tuple(found))
    path, values = listed
    entries = _entries(values, f"{path} [tool.nbinspect]")
    if is_approved(path, values):
        return ProjectTrust(tuple(found + entries))
    return ProjectTrust(tuple(found), unapproved=tuple(entries))


def trust_project(path: str | os.PathLike = ".", *, revoke: bool = False) -> tuple[Path, list[str]]:
    """Approve (or with `revoke`, withdraw) the ``[tool.nbinspect] trust`` list of the
    pyproject.toml nearest at or above `path`, as ``nbinspect trust`` does: (that file, its list)."""
    listed = _project_list(path)
    if listed is None:
        raise CheckpointError(
            f"no pyproject.toml with a [tool.nbinspect] trust list at or above {Path(path).resolve()} "
            "(or it is writable by others)"
        )
    pyproject, values = listed
    if revoke:
        remove(pyproject)
    else:
        record(pyproject, values)
    return pyproject, list(values)
