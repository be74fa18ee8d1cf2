"""The `nbinspect` command: ``inspect`` a model or checkpoint, ``compare`` two, ``demo``.

Exit codes: 0 ok, 2 usage error (argparse), 1 any other error, printed as one line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

from .. import examples
from ..analyze.compare import DEFAULT_THRESHOLDS
from ..backends.torch.memory import OPTIMIZERS
from ..backends.torch.skeleton import skeleton
from ..comparison import compare
from ..config_inspection import from_config, with_plan
from ..core.limits import safe_text
from ..core.output import check_not_input, write_output
from ..errors import first_line_for
from ..inspection import Inspection, inspect
from ..io.checkpoint import load_checkpoint
from ..render.compare_text import groups_table

__all__ = ["main"]


def _shape(text: str) -> tuple[int, ...]:
    """'1,3,224,224' (or 1x3x224x224): every part a non-negative integer, none left empty."""
    parts = text.replace("x", ",").split(",")
    if not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"expected a shape like 1,3,224,224, got {text!r}")
    return tuple(int(p) for p in parts)


def _floats(text: str) -> tuple[float, ...]:
    """Thresholds: positive finite numbers."""
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers like 1e-8,1e-6,1e-4, got {text!r}")
    return values


def _count(least: int) -> Callable[[str], int]:
    """An integer option of at least `least` (a batch of 0, a depth of -1 are usage errors)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected an integer of at least {least}, got {text!r}")
        return value

    return parse


def _dtype(text: str) -> Any:
    from ..dtypes import parse_dtype

    try:
        return parse_dtype(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _source_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--trust", action="store_true", help="allow a pickle that runs code from the file (only for files you trust)"
    )
    p.add_argument(
        "--key",
        help="entry of a training checkpoint holding the weights "
        "(default: model_state_dict, state_dict, model, ema, module)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nbinspect", description="See inside PyTorch models and checkpoints.")
    sub = parser.add_subparsers(dest="command", required=True)

    ins = sub.add_parser(
        "inspect",
        help="summarise a checkpoint (.pt/.pth/.bin, .safetensors, shard index or folder), or a model from its config",
    )
    ins.add_argument(
        "path",
        nargs="?",
        help="checkpoint file, *.index.json, or folder (with a Hugging Face config.json its model is built); "
        "leave out to size a model from --model/--config alone",
    )
    ins.add_argument("--model", help="build this model (package.module:factory): load the checkpoint into it, or alone")
    ins.add_argument(
        "--config",
        help="YAML (or JSON) file of keyword arguments for --model; alone, a config naming its model "
        "(_target_, class_path, a Hugging Face config.json)",
    )
    ins.add_argument(
        "--input-shape",
        type=_shape,
        help="trace a forward pass with zeros of this shape, e.g. 1,3,224,224 (needs a model)",
    )
    ins.add_argument(
        "--input-dtype", type=_dtype, help="dtype of that input, e.g. int64 for token ids (default: the model's)"
    )
    ins.add_argument(
        "--batch-size", type=_count(1), help="batch size for the memory plan (activations scale from the input shape)"
    )
    ins.add_argument(
        "--optimizer", default="adam", choices=sorted(OPTIMIZERS), help="optimizer for the memory plan (default adam)"
    )
    ins.add_argument("--depth", type=_count(0), default=3, help="layer tree depth (default 3)")
    ins.add_argument(
        "--verbose",
        action="store_true",
        help="every module (tree and memory plan) and every tensor's name, shape, dtype and size",
    )
    ins.add_argument("--json", metavar="OUT", help="also write the JSON export to OUT")
    ins.add_argument("--html", metavar="OUT", help="also write a standalone HTML page to OUT")
    ins.add_argument("--model-info", metavar="OUT", help="also write the model_info.json layout to OUT")
    _source_options(ins)

    cmp = sub.add_parser("compare", help="compare two checkpoints tensor by tensor")
    cmp.add_argument("a", help="reference checkpoint (file, *.index.json or folder)")
    cmp.add_argument("b", help="checkpoint compared with it")
    cmp.add_argument(
        "--thresholds", type=_floats, default=DEFAULT_THRESHOLDS, help="|delta| thresholds, default 1e-8,1e-6,1e-4"
    )
    cmp.add_argument("--top", type=_count(0), default=10, help="how many most-changed tensors to list (default 10)")
    cmp.add_argument(
        "--by", choices=("module", "layer"), action="append", default=[], help="also roll up per module or per layer"
    )
    cmp.add_argument("--json", metavar="OUT", help="also write the comparison as JSON to OUT")
    _source_options(cmp)

    demo = sub.add_parser("demo", help="summarise a built-in example model")
    demo.add_argument("--model", default="tiny_lm", choices=examples.names(), help="which example (default tiny_lm)")
    demo.add_argument("--depth", type=_count(0), default=3, help="layer tree depth (default 3)")
    return parser


def _inspection(args: argparse.Namespace) -> Inspection:
    """The Inspection the options ask for, with its memory plan: from the checkpoint (and the
    model it knows or --model builds), or from --model/--config alone on meta."""
    plan = {"input": args.input_shape, "input_dtype": args.input_dtype, "batch_size": args.batch_size}
    if args.path is None:
        return from_config(args.model, args.config, optimizer=args.optimizer, trust=args.trust, **plan)
    source = load_checkpoint(args.path, model=args.model, config=args.config, trust=args.trust, key=args.key)
    if args.input_shape and source.model is None:
        raise ValueError(f"{args.path}: a checkpoint without its model cannot run a forward pass: pass --model")
    # statistics only for the page that shows them: the text and JSON do not
    insp = inspect(source, input=args.input_shape, input_dtype=args.input_dtype, stats=bool(args.html))
    model: Any = source if source.model is not None else skeleton(source)
    return with_plan(insp, model, optimizer=args.optimizer, **plan)


def _inspect(args: argparse.Namespace) -> None:
    if args.model or args.path is None:
        # the factory (--model, a config's) is the user's own module, found as `python -m` would find it
        sys.path.insert(0, os.getcwd())
    inputs = [args.path, args.config]
    for out in (args.json, args.html, args.model_info):
        if out:
            check_not_input(out, inputs)
    insp = _inspection(args)
    _print(insp.report(depth=args.depth, verbose=args.verbose), args)
    if args.json:
        write_output(args.json, insp.to_json())
    if args.html:
        write_output(args.html, insp.to_html())
    if args.model_info:
        write_output(args.model_info, json.dumps(insp.to_model_info(), indent=2, allow_nan=False) + "\n")


def _compare(args: argparse.Namespace) -> None:
    if args.json:
        check_not_input(args.json, [args.a, args.b])
    a = load_checkpoint(args.a, trust=args.trust, key=args.key)
    b = load_checkpoint(args.b, trust=args.trust, key=args.key)
    result = compare(a, b, thresholds=args.thresholds)
    parts = [result.summary(top=args.top)]
    if "module" in args.by:
        parts.append("By module\n" + groups_table(result.by_module(), "Module", result.thresholds))
    if "layer" in args.by:
        parts.append("By layer\n" + groups_table(result.by_layer(), "Layer", result.thresholds))
    _print("\n\n".join(parts), args)
    if args.json:
        write_output(args.json, result.to_json())


def _print(text: str, args: argparse.Namespace) -> None:
    """The report on the terminal (or stderr when an output file goes to stdout): names and
    metadata from a file are shown with their control characters escaped."""
    stream = sys.stderr if "-" in (getattr(args, "json", None), getattr(args, "html", None)) else sys.stdout
    print("\n".join(safe_text(line) for line in text.split("\n")), file=stream)


def _run(args: argparse.Namespace) -> None:
    if args.command == "demo":
        print(inspect(examples.build(args.model)).summary(depth=args.depth))
    elif args.command == "inspect":
        _inspect(args)
    else:
        _compare(args)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "inspect" and args.path is None and not (args.model or args.config):
        parser.error("give a checkpoint path, or --model (and --config) to size a model from its config alone")
    if args.command == "inspect" and args.path and args.config and not args.model:
        parser.error("--config with a checkpoint needs --model, the factory it configures")
    try:
        with warnings.catch_warnings():
            if not sys.stderr.isatty():  # a log or a pipe gets the one error line, not library warnings
                warnings.simplefilter("ignore")
            _run(args)
    except KeyboardInterrupt:
        print("nbinspect: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the command's contract: one line, exit code 1
        message = first_line_for(exc, "--input-dtype")
        print(f"nbinspect: error: {safe_text(message, 1000)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
