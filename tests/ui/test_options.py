"""One options table for the command line and the magic: same names, parsing, validation and help."""

from __future__ import annotations

import argparse

import pytest
from IPython.core.error import UsageError

from nbinspect.ui import cli, magic
from nbinspect.ui.options import OPTIONS


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions}


def _inspect_parser() -> argparse.ArgumentParser:
    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["inspect"]


def test_the_command_line_and_the_magic_share_every_option_of_the_table():
    ours, theirs = _actions(_inspect_parser()), _actions(magic.PARSER)
    for name, option in OPTIONS.items():
        a, b = ours[name], theirs[name]
        assert a.option_strings == b.option_strings == list(option.flags), name
        if name == "input":  # the magic's --input takes an expression too; a spec is read as the CLI's
            continue
        assert (a.help, a.default, a.type) == (b.help, b.default, b.type), name


def test_input_specs_parse_the_same_in_both():
    """Issue 26: several inputs from the command line, e.g. --input x=512,2,5160 --input t=512:int64."""
    import torch

    from nbinspect.ui.options import InputSpec, input_spec

    assert input_spec("x_sig=512,2,5160") == InputSpec("x_sig", (512, 2, 5160), None)
    assert input_spec("t=512:int64") == InputSpec("t", (512,), torch.int64)
    assert input_spec("1x3x224x224") == InputSpec(None, (1, 3, 224, 224), None)
    with pytest.raises(argparse.ArgumentTypeError, match=r"\[NAME=\]SHAPE\[:DTYPE\]"):
        input_spec("x=oops")
    args = _inspect_parser().parse_args(["--input", "x=2,3", "--input", "t=2:int64", "--input-shape", "1,2"])
    assert [s.name for s in args.input] == ["x", "t"] and args.input_shape == (1, 2)
    assert magic._spec_input(input_spec("t=2:int64"), None)["t"].dtype == torch.int64


def test_checkpoint_is_an_alias_of_the_path(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    torch.save(torch.nn.Linear(2, 3).state_dict(), tmp_path / "w.pt")
    assert cli.main(["inspect", str(tmp_path / "w.pt")]) == 0
    positional = capsys.readouterr().out
    assert cli.main(["inspect", "--checkpoint", str(tmp_path / "w.pt")]) == 0
    assert capsys.readouterr().out == positional
    with pytest.raises(SystemExit) as exc:
        cli.main(["inspect", str(tmp_path / "w.pt"), "--checkpoint", str(tmp_path / "other.pt")])
    assert exc.value.code == 2


@pytest.mark.parametrize("flag", ["--input-dtype", "--dtype"])  # the magic's old spelling stays an alias
def test_aliases_parse_to_the_same_value_in_both(flag):
    import torch

    line = f"m --input-shape 2,8 {flag} int64"
    assert magic.PARSER.parse_argstring(line).input_dtype is torch.int64
    args = _inspect_parser().parse_args(["x.pt", "--input-shape", "2,8", flag, "int64"])
    assert args.input_dtype is torch.int64 and args.input_shape == (2, 8)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["--input-shape", "1,x,3"], "not a comma-separated list of integers"),
        (["--input-dtype", "float33"], "not a torch dtype"),
        (["--batch-size", "0"], "at least 1"),
        (["--depth", "-1"], "at least 0"),
        (["--bins", "0"], "at least 1"),
    ],
)
def test_bad_values_are_refused_with_the_same_message(words, message, capsys):
    with pytest.raises(UsageError, match=message):
        magic.PARSER.parse_argstring("m " + " ".join(words))
    with pytest.raises(SystemExit) as exit_:
        _inspect_parser().parse_args(["x.pt", *words])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_the_precision_reaches_the_memory_plan(capsys):
    """--precision is planned, not only parsed: the magic's plan is the Python call's."""
    from IPython.core.interactiveshell import InteractiveShell

    from nbinspect import examples, memory

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "nbinspect")
    shell.user_ns["net"] = examples.build("mlp")
    for precision in ("fp32", "bf16"):
        capsys.readouterr()
        shell.run_line_magic("inspect_model", f"net --batch-size 2 --precision {precision} --text")
        printed = capsys.readouterr().out
        plan = memory(shell.user_ns["net"], batch_size=2, precision=precision)
        assert str(plan) in printed  # the same table, so the same bytes and notes

    def whole(precision: str) -> dict:
        plan = memory(shell.user_ns["net"], precision=precision)
        return dict(plan[plan["layer"].isna()][["component", "bytes"]].itertuples(index=False))

    assert whole("bf16")["parameters"] * 2 == whole("fp32")["parameters"]  # the two runs planned different precisions
