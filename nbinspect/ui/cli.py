"""The `nbinspect` command: ``inspect`` a model or checkpoint, ``compare`` two, ``demo``,
``trust`` (approve the project's ``[tool.nbinspect] trust`` list).

Exit codes: 0 ok, 2 usage error (argparse), 1 any other error, printed as one line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from typing import Any

from .. import examples
from ..analyze.compare import DEFAULT_THRESHOLDS
from ..backends.torch.skeleton import skeleton
from ..comparison import compare
from ..config_inspection import from_config, with_plan
from ..core.output import check_not_input, write_output
from ..errors import CheckpointError, first_line_for
from ..inspection import Inspection, inspect
from ..io.checkpoint import load_checkpoint
from ..io.project_trust import project_trust, trust_project
from ..io.trust_approvals import approvals, approvals_path
from ..render.compare_text import groups_table
from ..terminal import safe_lines, safe_text
from .options import INSPECT, InputSpec, add_options, count

__all__ = ["main"]


def _floats(text: str) -> tuple[float, ...]:
    """Thresholds: positive finite numbers."""
    try:
        values = tuple(float(t) for t in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive numbers like 1e-8,1e-6,1e-4, got {text!r}")
    return values


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
    ins.add_argument("--checkpoint", dest="checkpoint", metavar="PATH", help="the checkpoint, as the positional PATH")
    add_options(ins, *INSPECT)
    ins.add_argument(
        "--verbose",
        action="store_true",
        help="every module (tree and memory plan) and every tensor's name, shape, dtype and size",
    )

    cmp = sub.add_parser("compare", help="compare two checkpoints tensor by tensor")
    cmp.add_argument("a", help="reference checkpoint (file, *.index.json or folder)")
    cmp.add_argument("b", help="checkpoint compared with it")
    cmp.add_argument(
        "--thresholds", type=_floats, default=DEFAULT_THRESHOLDS, help="|delta| thresholds, default 1e-8,1e-6,1e-4"
    )
    cmp.add_argument("--top", type=count(0), default=10, help="how many most-changed tensors to list (default 10)")
    cmp.add_argument(
        "--by", choices=("module", "layer"), action="append", default=[], help="also roll up per module or per layer"
    )
    add_options(cmp, "json", "trust", "key")

    demo = sub.add_parser("demo", help="summarise a built-in example model")
    demo.add_argument("--model", default="tiny_lm", choices=examples.names(), help="which example (default tiny_lm)")
    add_options(demo, "depth")

    trust = sub.add_parser(
        "trust",
        help="approve the [tool.nbinspect] trust list of this project's pyproject.toml "
        "(until then a config naming those factories runs nothing)",
    )
    what = trust.add_mutually_exclusive_group()
    what.add_argument("--revoke", action="store_true", help="withdraw this project's approval")
    what.add_argument("--list", action="store_true", help="show every approval and where it is kept")
    return parser


def _model_input(specs: list[InputSpec] | None, shape: tuple[int, ...] | None, dtype: Any) -> Any:
    """What the trace is called with: the --input specs (named ones as keyword arguments,
    unnamed ones positional, in order), or --input-shape."""
    if not specs:
        return shape
    import torch

    def value(spec: InputSpec) -> Any:
        kind = spec.dtype or dtype
        return spec.shape if kind is None else torch.zeros(spec.shape, dtype=kind)

    named = {s.name: value(s) for s in specs if s.name}
    positional = [value(s) for s in specs if not s.name]
    if named and positional:
        raise ValueError("--input: name every input (NAME=SHAPE) or none; a model is called with one or the other")
    if named:
        return named
    return positional[0] if len(positional) == 1 else tuple(positional)


def _inspection(args: argparse.Namespace) -> Inspection:
    """The Inspection the options ask for, with its memory plan: from the checkpoint (and the
    model it knows or --model builds), or from --model/--config alone on meta."""
    model_input = _model_input(args.input, args.input_shape, args.input_dtype)
    plan = {"input": model_input, "input_dtype": args.input_dtype, "batch_size": args.batch_size}
    if args.path is None:
        return from_config(
            args.model,
            args.config,
            optimizer=args.optimizer,
            precision=args.precision,
            trust=args.trust,
            config_key=args.config_key,
            **plan,
        )
    config = args.config
    if config is not None and args.config_key:
        from ..config_inspection import model_config

        config = model_config(args.model, config, args.config_key)
    source = load_checkpoint(args.path, model=args.model, config=config, trust=args.trust, key=args.key)
    if model_input is not None and source.model is None:
        raise ValueError(f"{args.path}: a checkpoint without its model cannot run a forward pass: pass --model")
    # statistics only for the page that shows them: the text and JSON do not
    stats = bool(args.html) and not args.no_stats
    insp = inspect(source, input=model_input, input_dtype=args.input_dtype, stats=stats, bins=args.bins)
    model: Any = source if source.model is not None else skeleton(source)
    return with_plan(insp, model, optimizer=args.optimizer, precision=args.precision, **plan)


def _builds_user_code(args: argparse.Namespace) -> bool:
    """Whether this command may import the user's own model code: --model, a config alone,
    --trust, or a project that lists trusted factories. Only then is the working directory put
    on the import path: elsewhere a downloaded folder's `yaml.py` or `numba.py` would shadow
    what nbinspect imports later."""
    if args.model or args.path is None or args.trust:
        return True
    try:
        return bool(project_trust().entries)
    except CheckpointError:  # a broken pyproject.toml trusts nothing; it is reported if a file names a factory
        return False


def _inspect(args: argparse.Namespace) -> None:
    if _builds_user_code(args):  # the factory is the user's own module, found as `python -m` finds it
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
    print(safe_lines(text), file=stream)


def _trust(args: argparse.Namespace) -> None:
    """``nbinspect trust``: the approval of a project's trust list, kept in the user's config."""
    if args.list:
        approved = approvals()
        lines = [f"{path}: {', '.join(a['trust'])}" for path, a in sorted(approved.items())]
        print(safe_lines("\n".join([f"approvals in {approvals_path()}:", *lines] if lines else ["no approvals"])))
        return
    pyproject, entries = trust_project(".", revoke=args.revoke)
    verb = "revoked" if args.revoke else "approved"
    print(safe_text(f"{verb}: {pyproject} trust = {entries} (recorded in {approvals_path()})", 2000))


def _run(args: argparse.Namespace) -> None:
    if args.command == "trust":
        _trust(args)
    elif args.command == "demo":
        print(inspect(examples.build(args.model)).summary(depth=args.depth))
    elif args.command == "inspect":
        _inspect(args)
    else:
        _compare(args)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "inspect":
        if args.path and args.checkpoint and args.path != args.checkpoint:
            parser.error("give the checkpoint once: PATH or --checkpoint")
        args.path = args.path or args.checkpoint
        if args.input and args.input_shape:
            parser.error("--input and --input-shape both describe the input: give one")
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
