"""Run the seed documents' code blocks (tests/docs/snippets) and read what they checked.

A snippet is one code block of a seed document (tests/docs/seeds), verbatim but for the
substitutions its header declares (``# SUBST-IMPORT: old => new``: the import path;
``# SUBST-PLACEHOLDER``: an unavoidable placeholder such as ``...``), between
``---- document block`` and ``---- end of document block ----``; before it, the
placeholders the document leaves to the user (its model, logger, files); after it, checks
(``fixtures/nbi_check.py``) of the documented structure and key names. The header's
``EXPECT-OUT`` / ``EXPECT-ABSENT`` / ``EXPECT-FILE`` lines are regexes the output or a
written file must (not) match. A snippet exits 77 to say it was skipped.

Each snippet runs in its own temporary directory (also its ``$HOME``) with the fixtures on
``PYTHONPATH``, offline, one thread per library. Python snippets run in children forked
from one server process that has already imported torch, transformers, matplotlib and
nbinspect (:func:`run_python`), so the suite pays those imports once instead of once per
block; shell snippets (the CLI's) run with bash. Designed for tests/docs/test_seed_*.py;
``python -m tests.docs.harness 004_`` prints a summary by hand.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from ..support.cli_server import CliServer, client_script

HERE = Path(__file__).resolve().parent
SNIPPETS = HERE / "snippets"
FIXTURES = SNIPPETS / "fixtures"
SEEDS = HERE / "seeds"
REPO = HERE.parents[1]
MARK_START = "---- document block"
MARK_END = "---- end of document block ----"
SKIP = 77
PRELOAD = ("torch", "numpy", "pandas", "matplotlib.pyplot", "transformers", "nbinspect", "nbinspect.track", "yaml")


@dataclass
class Header:
    doc: str | None = None
    subst: list[tuple[str, str, str]] = field(default_factory=list)
    expect: list[tuple[str, str]] = field(default_factory=list)
    absent: list[tuple[str, str]] = field(default_factory=list)
    files: list[tuple[str, str, str]] = field(default_factory=list)
    repo_test: bool = False


def header(path: Path) -> Header:
    h = Header()
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.match(r"^#\s*([A-Z-]+):?\s*(.*)$", line)
        if not m:
            continue
        key, rest = m.groups()
        if key == "DOC":
            h.doc = rest.split()[0] if rest else None
        elif key in ("SUBST-IMPORT", "SUBST-PLACEHOLDER"):
            old, _, new = rest.partition(" => ")
            h.subst.append((key.removeprefix("SUBST-").lower(), old.replace("\\n", "\n"), new.replace("\\n", "\n")))
        elif key in ("EXPECT-OUT", "EXPECT-ABSENT"):
            label, _, rx = rest.partition(" :: ")
            (h.expect if key == "EXPECT-OUT" else h.absent).append((label.strip(), rx))
        elif key == "EXPECT-FILE":
            label, f, rx = ([*rest.split(" :: "), "", ""])[:3]
            h.files.append((label.strip(), f.strip(), rx))
        elif key == "REPO-TEST":
            h.repo_test = True
    return h


def snippets(prefix: str) -> list[Path]:
    """The snippets of one document (``"004"``), in order."""
    return sorted(p for p in SNIPPETS.iterdir() if p.name.startswith(prefix) and p.suffix in (".py", ".sh"))


# ------------------------------------------------------------------ "as written"


def document_block(doc: str) -> str:
    """Block `doc` (``"004_06"``) of its seed document, read from the seed itself (a seed
    that drifts fails the as-written test), dedented as its fence is."""
    index = {b["file"].split(".")[0]: b for b in json.loads((SEEDS / "blocks.json").read_text(encoding="utf-8"))}
    b = index[doc]
    lines = (SEEDS / b["doc"]).read_text(encoding="utf-8").splitlines()
    fence = lines[b["start"] - 1]
    indent = len(fence) - len(fence.lstrip())
    body = "\n".join(ln[indent:] if ln[:indent].strip() == "" else ln for ln in lines[b["start"] : b["end"] - 1])
    return textwrap.dedent(body) if indent else body


def region(path: Path) -> list[str] | None:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next((i for i, ln in enumerate(lines) if MARK_START in ln), None)
    end = next((i for i, ln in enumerate(lines) if MARK_END in ln), None)
    return None if start is None or end is None else lines[start + 1 : end]


def as_written(path: Path) -> str | None:
    """None when the snippet's block region is the document's block with exactly the
    declared substitutions; else what differs."""
    h = header(path)
    if h.doc is None:
        return None
    want = document_block(h.doc)
    for _, old, new in h.subst:
        if old not in want:
            return f"substitution source not in the block: {old!r}"
        want = want.replace(old, new)
    got = region(path)
    if got is None:
        return "no document block markers"
    w = [ln.rstrip() for ln in want.rstrip("\n").splitlines()]
    g = [ln.rstrip() for ln in got]
    for i, (a, b) in enumerate(zip(w, g)):
        if a != b:
            return f"line {i + 1} differs: document {a!r} vs snippet {b!r}"
    return None if len(w) == len(g) else f"length differs: document {len(w)} lines, snippet {len(g)}"


# ------------------------------------------------------------------ running


@dataclass
class Result:
    name: str
    rc: int
    out: str
    err: str
    checks: list[dict]

    @property
    def skipped(self) -> bool:
        return self.rc == SKIP

    def missed(self) -> list[dict]:
        return [c for c in self.checks if not c["ok"]]

    def explain(self) -> str:
        lines = [f"{self.name}: exit {self.rc}"]
        lines += [f"  MISS [{c['kind']}] {c['label']}: {c['detail']}" for c in self.missed()]
        tail = "\n".join(ln for ln in self.err.splitlines() if not ln.startswith("CHECK "))[-2500:]
        return "\n".join(lines) + ("\n--- stderr (tail) ---\n" + tail if self.rc not in (0, SKIP) else "")


def environment(work: Path) -> dict[str, str]:
    """The snippets' environment: the code under test and the fixtures on PYTHONPATH,
    `nbinspect`/`python` on PATH as this interpreter, offline, one thread per library."""
    bin_dir = work / "bin"
    bin_dir.mkdir(exist_ok=True)
    py = sys.executable
    # `nbinspect` runs in a child of one preloaded server (tests/support/cli_server.py)
    (bin_dir / "nbinspect").write_text(client_script(work / "nbinspect.sock", py))
    for name in ("python", "python3"):
        (bin_dir / name).write_text(f'#!/bin/sh\nexec "{py}" "$@"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k in ("LANG", "TERM", "USER", "LOGNAME", "SHELL", "TZ")}
    env.update(
        PATH=f"{bin_dir}:{Path(py).parent}:/usr/local/bin:/usr/bin:/bin",
        PYTHONPATH=os.pathsep.join((str(REPO), str(FIXTURES))),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONIOENCODING="utf-8",
        NUMBA_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MPLBACKEND="Agg",
        MPLCONFIGDIR=str(work / "mpl"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(work / "hf"),
        WANDB_MODE="offline",
        TOKENIZERS_PARALLELISM="false",
        SNIPPET_PY=py,
        FIXTURES=str(FIXTURES),
        LC_ALL="C.UTF-8",
    )
    return env


def _read(path: Path, run_dir: Path, rc: int, out: str, err: str) -> Result:
    h = header(path)
    checks_file = run_dir / ".checks.jsonl"
    checks = []
    if checks_file.exists():
        checks = [json.loads(ln) for ln in checks_file.read_text(encoding="utf-8").splitlines() if ln.strip()]
    text = out + "\n" + "\n".join(ln for ln in err.splitlines() if not ln.startswith("CHECK "))
    for label, rx in h.expect:
        ok = re.search(rx, text, re.M) is not None
        checks.append({"label": label, "ok": ok, "detail": "" if ok else f"no match for /{rx}/", "kind": "output"})
    for label, rx in h.absent:
        m = re.search(rx, text, re.M)
        detail = "" if m is None else f"found {m.group(0)[:120]!r}"
        checks.append({"label": label, "ok": m is None, "detail": detail, "kind": "output"})
    for label, rel, rx in h.files:
        f = run_dir / rel
        if not f.exists():
            checks.append({"label": label, "ok": False, "detail": f"{rel} not written", "kind": "file"})
            continue
        ok = not rx or re.search(rx, f.read_text(encoding="utf-8", errors="replace"), re.M) is not None
        checks.append({"label": label, "ok": ok, "detail": "" if ok else f"{rel}: no match for /{rx}/", "kind": "file"})
    return Result(path.name, rc, out, err, checks)


_SERVER = r"""
import importlib, io, os, runpy, sys, traceback, warnings, json
for name in sys.argv[1].split(","):
    try:
        importlib.import_module(name)
    except Exception:
        pass
sys.stdout.write("ready\n"); sys.stdout.flush()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.chdir(job["cwd"])
        os.environ.update(job["env"])
        out = os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1); os.dup2(err, 2)
        sys.argv = [job["path"]]
        sys.path[0] = os.path.dirname(job["path"])  # as `python script.py` does
        warnings.resetwarnings()
        code = 0
        try:
            runpy.run_path(job["path"], run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush(); sys.stderr.flush()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(json.dumps(os.waitstatus_to_exitcode(status)) + "\n"); sys.stdout.flush()
"""


class Runner:
    """Runs snippets: Python ones forked from one preloaded server, shell ones with bash."""

    def __init__(self, work: Path, timeout: int = 600):
        self.work = work
        self.timeout = timeout
        self.env = environment(work)
        self._server: subprocess.Popen | None = None
        self.cli = CliServer(work, self.env)

    def _start(self) -> subprocess.Popen:
        if self._server is None:
            self._server = subprocess.Popen(
                [sys.executable, "-c", _SERVER, ",".join(PRELOAD)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=self.env,
                cwd=self.work,
            )
            assert self._server.stdout is not None
            self._server.stdout.readline()  # "ready"
        return self._server

    def run(self, path: Path, extra_env: dict[str, str] | None = None) -> Result:
        run_dir = Path(tempfile.mkdtemp(prefix=path.stem[:20] + "-", dir=self.work))
        env = dict(extra_env or {}, HOME=str(run_dir), SNIPPET_CHECKS=str(run_dir / ".checks.jsonl"))
        env["SNIPPET_FILE"] = str(path)
        if path.suffix == ".py":
            server = self._start()
            out_f, err_f = run_dir / ".stdout", run_dir / ".stderr"
            job = {"path": str(path), "cwd": str(run_dir), "env": env, "out": str(out_f), "err": str(err_f)}
            assert server.stdin is not None and server.stdout is not None
            server.stdin.write(json.dumps(job) + "\n")
            server.stdin.flush()
            rc = int(json.loads(server.stdout.readline()))
            out = out_f.read_text(encoding="utf-8", errors="replace")
            err = err_f.read_text(encoding="utf-8", errors="replace")
        else:
            self.cli.start()
            proc = subprocess.run(
                ["bash", str(path)],
                cwd=run_dir,
                env={**self.env, **env},
                capture_output=True,
                text=True,
                timeout=self.timeout,
            )
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        return _read(path, run_dir, rc, out, err)

    def close(self) -> None:
        self.cli.stop()
        if self._server is not None:
            assert self._server.stdin is not None
            self._server.stdin.close()
            self._server.wait(timeout=30)
            self._server = None


def genesis_template(work: Path, runner: Runner) -> Path:
    """Seed 002's GENESIS project (configs, checkpoints, model code), built once; the
    snippets' make_genesis.py copies it when GENESIS_TEMPLATE names it."""
    home = work / "genesis-home"
    root = home / "GENESIS" / "GENESIS-main" / "GENESIS"
    if not root.exists():
        env = {k: v for k, v in runner.env.items() if k != "GENESIS_TEMPLATE"}
        subprocess.run(
            [sys.executable, str(FIXTURES / "genesis" / "make_genesis.py"), str(root)], env=env, check=True, cwd=work
        )
    return root


if __name__ == "__main__":  # python -m tests.docs.harness 004_
    work = Path(tempfile.mkdtemp(prefix="nbi-docs-"))
    r = Runner(work)
    extra = {"GENESIS_TEMPLATE": str(genesis_template(work, r))}
    for p in snippets(sys.argv[1] if len(sys.argv) > 1 else ""):
        res = r.run(p, extra)
        ok = sum(c["ok"] for c in res.checks)
        print(f"{p.name:55} rc {res.rc:3}  checks {ok}/{len(res.checks)}  {as_written(p) or 'as written'}")
    r.close()
