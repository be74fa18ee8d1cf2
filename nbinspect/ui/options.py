"""The options the command line and the ``%inspect_model`` magic share: one table, so both
spell, parse, validate and explain an option the same way.

Each entry names the option (old spellings kept as aliases), how its text becomes a value
(raising ``argparse.ArgumentTypeError`` with a message that names what was wrong), its
default and its help. :func:`add_options` puts entries on an ``argparse`` parser: the CLI's,
or IPython's ``MagicArgumentParser`` (which turns a parse error into a ``UsageError``).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..dtypes import parse_dtype

__all__ = ["INSPECT", "OPTIONS", "InputSpec", "Option", "add_options", "count", "dtype", "input_spec", "shape"]


def shape(text: str) -> tuple[int, ...]:
    """'1,3,224,224' (or 1x3x224x224): every part a non-negative integer, none left empty."""
    parts = text.replace("x", ",").split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of integers, e.g. 1,3,224,224")
    return tuple(int(p) for p in parts)


def count(least: int) -> Callable[[str], int]:
    """An integer of at least `least` (a batch of 0, a depth of -1 are usage errors)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer of at least {least}, got {text!r}")
        return value

    return parse


def dtype(text: str) -> Any:
    try:
        return parse_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True)
class InputSpec:
    """One model input of ``--input [NAME=]SHAPE[:DTYPE]``: a keyword argument when named,
    else the next positional one; `dtype` None means ``--input-dtype`` or the model's."""

    name: str | None
    shape: tuple[int, ...]
    dtype: Any = None


INPUT_SPEC = re.compile(r"^(?:(?P<name>[A-Za-z_]\w*)=)?(?P<shape>\d+(?:[,x]\d+)*)(?::(?P<dtype>\w+))?$")


def input_spec(text: str) -> InputSpec:
    """``x_sig=512,2,5160``, ``t=512:int64``, ``1x3x224x224`` -> an :class:`InputSpec`."""
    m = INPUT_SPEC.match(text.strip())
    if m is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not [NAME=]SHAPE[:DTYPE], e.g. x=512,2,5160 or t=512:int64 or 1,3,224,224"
        )
    return InputSpec(m["name"], shape(m["shape"]), dtype(m["dtype"]) if m["dtype"] else None)


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]  # the name first, then old spellings still accepted
    help: str
    parse: Callable[[str], Any] | None = None
    default: Any = None
    switch: bool = False  # present or not (store_true)
    metavar: str | None = None
    repeat: bool = False  # may be given several times (a list)

    @property
    def dest(self) -> str:
        return self.flags[0].lstrip("-").replace("-", "_")


OPTIONS: dict[str, Option] = {
    o.dest: o
    for o in (
        Option(
            ("--model",),
            "build the model: package.module:factory (in the magic also a class or function in scope); "
            "alone it is sized on the meta device, with a checkpoint the weights are loaded into it",
            metavar="FACTORY",
        ),
        Option(
            ("--config",),
            "keyword arguments for --model: a YAML or JSON file (in the magic also a dict expression); "
            "alone, a config naming its model (_target_, class_path, a Hugging Face config.json)",
            metavar="PATH",
        ),
        Option(
            ("--config-key",),
            "the section of --config that configures the model, e.g. model (dotted for deeper ones); "
            "default: the one section that fits (names a factory, or the factory takes its keys)",
            metavar="KEY",
        ),
        Option(("--input-shape",), "trace a forward pass with zeros of this shape, e.g. 1,3,224,224", shape, None),
        Option(
            ("--input",),
            "one model input, repeatable: [NAME=]SHAPE[:DTYPE], e.g. --input x=512,2,5160 --input t=512:int64 "
            "(named: a keyword argument; unnamed: the next positional one)",
            input_spec,
            metavar="SPEC",
            repeat=True,
        ),
        Option(
            ("--input-dtype", "--dtype"),
            "dtype of that input, e.g. int64 for token ids (default: the model's)",
            dtype,
            metavar="DTYPE",
        ),
        Option(
            ("--batch-size",),
            "plan training memory for this batch size (activations scale from the traced input)",
            count(1),
            metavar="N",
        ),
        Option(("--optimizer",), "optimizer for the memory plan: adam, adamw, sgd, ... (default adam)", None, "adam"),
        Option(
            ("--precision",),
            "precision for the memory plan: fp32, bf16, fp16, amp-bf16, amp-fp16 (default fp32)",
            None,
            "fp32",
        ),
        Option(("--depth",), "layer tree depth of the text summary (default 3)", count(0), 3, metavar="N"),
        Option(("--bins",), "histogram bins per tensor (default 64)", count(1), 64, metavar="N"),
        Option(("--no-stats",), "skip the weight statistics (faster on huge models)", switch=True),
        Option(("--json",), "also write the JSON export to this path", metavar="OUT"),
        Option(("--html",), "also write a standalone HTML page (works offline) to this path", metavar="OUT"),
        Option(("--model-info",), "also write the model_info.json layout to this path", metavar="OUT"),
        Option(
            ("--trust",),
            "allow a pickle or a config that runs code (only for files you trust); a project trusts its own "
            "factories once with [tool.nbinspect] trust = [...] in pyproject.toml",
            switch=True,
        ),
        Option(
            ("--key",),
            "entry of a training checkpoint holding the weights (default: model_state_dict, state_dict, model, "
            "ema, module)",
        ),
    )
}


INSPECT = (
    "model", "config", "config_key", "input_shape", "input", "input_dtype", "batch_size", "optimizer",
    "precision", "depth", "bins", "no_stats", "json", "html", "model_info", "trust", "key",
)  # fmt: skip
"""What ``nbinspect inspect`` and ``%inspect_model`` both take (the magic's ``--input`` also
takes an expression: a value of the spec grammar is read as a spec there)."""


def add_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """Put the options `names` (keys of :data:`OPTIONS`) on `parser`."""
    for name in names:
        o = OPTIONS[name]
        if o.switch:
            parser.add_argument(*o.flags, dest=o.dest, action="store_true", help=o.help)
        elif o.repeat:
            parser.add_argument(
                *o.flags, dest=o.dest, type=o.parse or str, action="append", metavar=o.metavar, help=o.help
            )
        else:
            parser.add_argument(
                *o.flags, dest=o.dest, type=o.parse or str, default=o.default, metavar=o.metavar, help=o.help
            )
