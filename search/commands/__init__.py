"""The `awnn` subcommands, one module each (`add_parser(subparsers)`, `run(args)`)."""
from __future__ import annotations

import argparse
import difflib


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that never takes a prefix of a flag for the flag
    (`--strategie` is not `--strategies`): `allow_abbrev=False` on the `awnn`
    parser and, through `parser_class`, on every subcommand's parser."""

    def __init__(self, *args, **kwargs):
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """argparse's `unrecognized arguments: ...`, with the closest flags of
    `parser` for each unknown one (`--strategie` -> `--strategies`)."""
    flags = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
    hints = []
    for token in extras:
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            close = difflib.get_close_matches(name, flags, n=1)
            if close:
                hints.append(f"{name}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")


def command_parser(sub, name: str, help: str, description: str, examples: list[str]):
    """A subcommand's parser with its one-line help (in `awnn --help`), a
    description and examples (in `awnn NAME --help`); no flag abbreviations."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
                          allow_abbrev=False)
