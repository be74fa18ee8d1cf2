"""The `nbinspect` command."""

from __future__ import annotations

import argparse
import sys

from . import examples
from .inspection import inspect

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nbinspect", description="See inside PyTorch models.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="summarise a built-in example model")
    demo.add_argument("--model", default="tiny_lm", choices=examples.names(), help="which example (default tiny_lm)")
    demo.add_argument("--depth", type=int, default=3, help="layer tree depth (default 3)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        print(inspect(examples.build(args.model)).summary(depth=args.depth))
    return 0


if __name__ == "__main__":
    sys.exit(main())
