"""Writes what the front-end takes from Python, so the two cannot drift apart:

- ``js/src/payload.ts``: the payload's TypeScript types, from :mod:`nbinspect.payload_schema`;
- ``js/test/fixtures/*.json``: payloads :func:`build_payload` makes of the example models
  (traced, with statistics), of a comparison, and of a model with foldable repeated blocks;
  the vitest suite renders them.

    python tests/generate_contract.py            # rewrite the files (``make contract``)
    python tests/generate_contract.py --check    # list stale files, exit 1 if any

``tests/render/test_payload_contract.py`` fails while a file is stale.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn

import nbinspect
from nbinspect import examples
from nbinspect.analyze.compare import compare_frame
from nbinspect.analyze.views import view_data
from nbinspect.payload_schema import typescript
from nbinspect.render.payload import build_payload


def _payload(name, framework, totals, frames, sides=None, timeline=None):
    """The payload as a result builds it: the views decided from the frames, then rendered."""
    return build_payload(name, framework, totals, frames, sides, timeline, views=view_data(frames))


JS = Path(__file__).resolve().parents[1] / "js"
TYPES = JS / "src" / "payload.ts"
FIXTURES = JS / "test" / "fixtures"


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc = nn.Linear(8, width, bias=False)


class Folds(nn.Module):
    """A stem, four identical numbered blocks and an odd fifth one (they fold into one row
    "blocks.0–3 ×4" beside "4"), and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(5, 8, bias=False)
        self.blocks = nn.ModuleList([Block(8) for _ in range(4)] + [Block(4)])
        self.head = nn.Linear(1, 3, bias=False)


def _folds() -> dict:
    """Folds with tensor statistics (no module roll-up) and a comparison in which only
    ``stem.weight`` changed, by a relative 0.5."""
    torch.manual_seed(0)
    model = Folds()
    other = Folds()
    other.load_state_dict(model.state_dict())
    with torch.no_grad():
        other.stem.weight.mul_(1.5)
    insp = nbinspect.inspect(model)
    frames = {k: v for k, v in insp.frames.items() if k != "stats_by_module"}
    frames = {**frames, "compare": compare_frame(model, other)}
    return _payload("Net", "torch", insp.totals, frames, sides=("Net", "Net, stem × 1.5"))


def payloads() -> dict[str, dict]:
    """Fixture name -> payload."""
    out = {}
    for name in examples.names():
        insp = nbinspect.inspect(examples.build(name), input=examples.example_input(name))
        out[name] = _payload(insp.name, insp.framework, insp.totals, insp.frames)
    cmp = nbinspect.compare(examples.build("tiny_lm", seed=0), examples.build("tiny_lm", seed=1))
    out["compare_tiny_lm"] = _payload("TinyLM", "torch", cmp.totals, cmp.frames, ("TinyLM seed 0", "TinyLM seed 1"))
    out["folds"] = _folds()
    return out


def dump(payload: dict) -> str:
    """JSON with one line per field and per column, so a diff shows which column changed."""
    lines = []
    for key, value in payload.items():
        if isinstance(value, dict) and key in ("modules", "tensors", "folds"):
            inner = [f"    {json.dumps(k)}: {json.dumps(v, allow_nan=False)}" for k, v in value.items()]
            lines.append(f"  {json.dumps(key)}: {{\n" + ",\n".join(inner) + "\n  }")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, allow_nan=False)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def outputs() -> dict[Path, str]:
    """Every generated file and its content."""
    files = {TYPES: typescript()}
    files.update({FIXTURES / f"{name}.json": dump(p) for name, p in payloads().items()})
    return files


def same_json(a: Any, b: Any, counts: bool = False) -> bool:
    """Equal up to CPU noise: statistics may differ in their last digits between CPUs (rel
    1e-4), and a value on a histogram edge may land in the neighbouring bin (counts ±1)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k], k == "c") for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y, counts) for x, y in zip(a, b))
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b))
    if not numbers:
        return a == b
    if isinstance(a, int) and isinstance(b, int):
        return abs(a - b) <= (1 if counts else 0)
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-9)


def stale() -> list[Path]:
    """The generated files that are missing or differ from what would be written now."""
    expected = outputs()
    out = []
    for path, text in expected.items():
        if not path.is_file():
            out.append(path)
        elif path.suffix == ".json":
            if not same_json(json.loads(path.read_text(encoding="utf-8")), json.loads(text)):
                out.append(path)
        elif path.read_text(encoding="utf-8") != text:
            out.append(path)
    return out + sorted(set(FIXTURES.glob("*.json")) - set(expected))  # left over from a removed fixture


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list stale files instead of writing them")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for path in old:
            print(f"stale: {path.relative_to(JS.parent)}")
        return 1 if old else 0
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for path in FIXTURES.glob("*.json"):
        path.unlink()
    for path, text in outputs().items():
        path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
