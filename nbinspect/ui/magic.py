"""%inspect_model: inspect a model from a notebook cell.

%load_ext nbinspect
%inspect_model model --input-shape 1,3,32,32
insp = %inspect_model model.encoder --text

%%inspect_model model
loss = model(batch).sum()     # the cell's own forward passes are traced
"""

from __future__ import annotations

import dis
import os
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic import Magics, line_cell_magic, magics_class, needs_local_scope
from IPython.core.magic_arguments import MagicArgumentParser

from ..errors import first_line, first_line_for
from .options import INPUT_SPEC, INSPECT, InputSpec, add_options, input_spec

__all__ = ["InspectMagics", "load_ipython_extension"]

MAGIC = "inspect_model"


def _fail(message: str) -> UsageError:
    return UsageError(f"%{MAGIC}: {message}")


def _failed(exc: Exception) -> UsageError:
    """The user's model or input failed: what failed, in one line naming the magic's options."""
    return _fail(first_line_for(exc, "--input-dtype"))


def _parser() -> MagicArgumentParser:
    parser = MagicArgumentParser(prog=f"%{MAGIC}", description="Inspect a model and show it as an interactive tree.")
    parser.add_argument(
        "expr",
        nargs="?",
        help="the model: any expression in the notebook's scope, e.g. model, model.encoder, nets[0], or a "
        "checkpoint path; left out with --model/--config",
    )
    parser.add_argument(
        "--input", metavar="EXPR", help="trace a forward pass with this tensor, tuple or dict expression"
    )
    parser.add_argument("--sample-input", metavar="TEXT", help="a vLLM engine: generate greedily from this prompt once")
    parser.add_argument("--compare", metavar="EXPR", help="compare with a second model or a checkpoint path")
    parser.add_argument("--text", action="store_true", help="print the text summary instead of showing the widget")
    parser.add_argument("-o", "--output", metavar="NAME", help="store the result in this variable too")
    add_options(parser, *(name for name in INSPECT if name != "input"))  # its --input: above
    return parser


def _spec_input(spec: InputSpec, dtype: Any) -> Any:
    import torch

    kind = spec.dtype or dtype
    value: Any = spec.shape if kind is None else torch.zeros(spec.shape, dtype=kind)
    return {spec.name: value} if spec.name else value


PARSER = _parser()  # the options of the command line (ui/options.py) plus the notebook's own


def _documented(fn: Any) -> Any:
    """The magic's help (``%inspect_model?``) is its parser's."""
    fn.__doc__ = (fn.__doc__ or "") + "\n\n" + PARSER.format_help()
    return fn


@magics_class
class InspectMagics(Magics):
    @property
    def _shell(self) -> InteractiveShell:
        assert self.shell is not None, "a registered magic always has its shell"
        return self.shell

    def _eval(self, expr: str, local_ns: dict | None, what: str) -> Any:
        try:
            return eval(expr, self._shell.user_ns, local_ns)  # the user's own expression, in their scope
        except NameError as exc:
            raise _fail(f"{what} {expr!r}: {exc}") from None
        except Exception as exc:
            raise _fail(f"{what} {expr!r} failed: {type(exc).__name__}: {exc}") from None

    def _factory(self, spec: str | None, local_ns: dict | None) -> Any:
        """--model: "package.module:factory" as it is, else an expression in scope (a class or function)."""
        if spec is None or ":" in spec:
            return spec
        return self._eval(spec, local_ns, "--model")

    def _config(self, text: str | None, local_ns: dict | None) -> Any:
        """--config: a file path, else an expression in scope (a dict of keyword arguments)."""
        if text is None or Path(text).expanduser().exists():
            return text
        return self._eval(text, local_ns, "--config (neither a file nor a name in scope)")

    def _displayhook_will_show(self) -> bool:
        """True when the value this magic returns goes to IPython's displayhook (the magic is
        the cell's last expression), so displaying it here as well would show it twice."""
        return _result_is_printed() and not self._shell.displayhook.quiet()

    @needs_local_scope
    @line_cell_magic(MAGIC)
    @_documented
    def inspect_model(self, line: str, cell: str | None = None, local_ns: dict | None = None):
        """Inspect a model and show it as an interactive tree; returns the Inspection.

        As a cell magic (``%%inspect_model model``) it runs the cell and traces the forward
        passes the cell's own code makes, with its real inputs; shown after the cell."""
        # IPython hands a line magic its trailing ';' (the "show no Out[]" marker)
        args = PARSER.parse_argstring(line.rstrip().removesuffix(";"))
        if args.expr is None and not (args.model or args.config):
            raise _fail("give a model expression, or --model/--config to size a model from its config alone")
        if args.expr is None and args.compare:
            raise _fail("--compare needs weights; a model built from its config alone has none")
        if cell is not None and (args.expr is None or args.model or args.config):
            raise _fail(f"%%{MAGIC} traces a live model the cell runs: give its expression, without --model/--config")
        model = None if args.expr is None else self._eval(args.expr, local_ns, "model expression")
        factory = self._factory(args.model, local_ns)
        config = self._config(args.config, local_ns)
        if cell is not None:
            return self._watch_cell(model, cell, args)
        model_input = args.input_shape
        if args.input is not None and INPUT_SPEC.match(args.input.strip()):  # NAME=SHAPE[:DTYPE], as the CLI's
            model_input = _spec_input(input_spec(args.input), args.input_dtype)
        elif args.input is not None:
            model_input = self._eval(args.input, local_ns, "--input")
        dtype = args.input_dtype
        other = self._eval(args.compare, local_ns, "--compare") if args.compare else None
        result, extras = _run(model, model_input, dtype, args, other, factory, config)
        if result is None:  # a sharded model, on a rank that does not receive the frames
            return None
        self._keep(result, args)
        shown_by_ipython = self._displayhook_will_show()
        from IPython.display import display

        compared = args.compare is not None  # the comparison's widget shows the model's tree: one widget
        if args.text:
            print(result.summary(depth=args.depth))
        elif (not shown_by_ipython or extras) and not compared:
            display(result)  # the model first, then what was asked about it
        for extra in extras:  # memory plan, comparison: after the model itself
            print(extra) if args.text else display(extra)
        if shown_by_ipython and (args.text or extras):
            return None  # shown already: IPython must not show it again below the extras
        return result

    def _keep(self, result: Any, args) -> None:
        """The --json, --html and -o outputs; a path that cannot be written is a UsageError."""
        model_info = getattr(result, "to_model_info", None)  # an Inspection's; a comparison has none
        outputs = [("--json", args.json, result.to_json), ("--html", args.html, result.to_html)]
        if args.model_info and model_info is None:
            raise _fail("--model-info describes one model, not a comparison")
        outputs.append(("--model-info", args.model_info, model_info))
        for flag, path, write in outputs:
            if path:
                try:
                    write(path)
                except OSError as exc:
                    raise _fail(f"{flag} {path!r}: cannot write there ({exc.strerror or first_line(exc)})") from None
        if args.output:
            self._shell.user_ns[args.output] = result

    def _watch_cell(self, model: Any, cell: str, args) -> Any:
        for option in ("input", "input_shape", "input_dtype", "batch_size", "compare"):
            if getattr(args, option) is not None:
                flag = "--" + option.replace("_", "-")
                raise _fail(f"{flag} does not apply to %%{MAGIC}: it traces the forward passes the cell runs")
        from ..backends import as_source, backend_for
        from ..inspection import inspect, with_trace

        try:
            live = as_source(model).model
        except TypeError as exc:
            raise _fail(str(exc)) from None
        backend = backend_for(live)
        if backend is None:
            raise _fail(f"{args.expr} is not a live model: %%{MAGIC} watches the forward passes a cell runs")
        with backend.watch(live) as recorded:
            outcome = self._shell.run_cell(cell, store_history=False)
        if not outcome.success:
            return None  # IPython has shown the cell's own error
        if not recorded.calls:
            raise _fail(f"the cell never called {args.expr}, so there was nothing to trace")
        try:
            inspected = inspect(model, stats=not args.no_stats, bins=args.bins)
            if inspected is None:  # a sharded model, on a rank that does not receive the frames
                return None
            result = with_trace(inspected, recorded)
        except Exception as exc:
            raise _failed(exc) from None
        self._keep(result, args)
        if args.text:
            print(result.summary(depth=args.depth))
            return None
        return result  # IPython displays a cell magic's value


def _unquoted(text: str) -> str:
    """IPython's argument splitter keeps the quotes around a prompt with spaces."""
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" else text


def _result_is_printed() -> bool:
    """Whether the cell code that called ``run_line_magic`` prints the call's value next.

    IPython compiles a cell's last expression in 'single' mode, where the value goes to
    ``sys.displayhook`` (PRINT_EXPR up to Python 3.11, CALL_INTRINSIC_1 INTRINSIC_PRINT
    after); an assignment stores it instead. Read from the caller's bytecode, because
    the cell's source is not in the history when a client runs it with
    ``store_history=False`` (nbval does)."""
    frame: FrameType | None = sys._getframe()
    while frame is not None and frame.f_code.co_name != "run_line_magic":
        frame = frame.f_back
    caller = frame.f_back if frame is not None else None
    if caller is None:
        return False
    for instruction in dis.get_instructions(caller.f_code):
        if instruction.offset <= caller.f_lasti or instruction.opname in ("CACHE", "EXTENDED_ARG"):
            continue
        return instruction.opname == "PRINT_EXPR" or instruction.argrepr == "INTRINSIC_PRINT"
    return False


def _run(model: Any, model_input: Any, dtype: Any, args, other: Any, factory: Any, config: Any) -> tuple[Any, list]:
    """The Inspection, plus the memory plan and comparison the options ask for.
    Any failure becomes a one-line UsageError."""
    from ..backends import as_source, is_engine
    from ..comparison import compare
    from ..config_inspection import from_config
    from ..inspection import inspect, memory
    from ..io.checkpoint import load_checkpoint

    try:
        if model is None:  # the config alone: built on meta, planned
            plan = {"batch_size": args.batch_size, "optimizer": args.optimizer, "precision": args.precision}
            result = from_config(
                factory,
                config,
                input=model_input,
                input_dtype=dtype,
                trust=args.trust,
                config_key=args.config_key,
                **plan,
            )
            return result, [result.memory]
        if factory is not None or config is not None:
            model = load_checkpoint(model, model=factory, config=config, trust=args.trust, key=args.key)
        elif isinstance(model, (str, os.PathLike)):  # a checkpoint path: the same options as the command line
            model = load_checkpoint(model, trust=args.trust, key=args.key)
        if not is_engine(model):  # one source for the inspection, the plan and the comparison: read once
            model = as_source(model)
        prompt = None if args.sample_input is None else _unquoted(args.sample_input)
        result = inspect(
            model, input=model_input, input_dtype=dtype, stats=not args.no_stats, bins=args.bins, sample_input=prompt
        )
        extras: list = []
        if args.batch_size is not None:
            extras.append(
                memory(
                    model,
                    input=model_input,
                    input_dtype=dtype,
                    batch_size=args.batch_size,
                    optimizer=args.optimizer,
                    precision=args.precision,
                )
            )
        if other is not None:
            # the comparison's before/after histograms: the model's side is the inspection's statistics
            comparison = compare(model, other, bins=args.bins, stats_a=result.frames.get("stats"))
            comparison.sides = (args.expr, args.compare)  # the title names what the user typed
            extras.append(comparison)
    except Exception as exc:  # the user's model or input: say what failed, in one line
        raise _failed(exc) from None
    return result, extras


def load_ipython_extension(ipython) -> None:
    """`%load_ext nbinspect`; loading twice is harmless (the magic is replaced by itself)."""
    ipython.register_magics(InspectMagics)
