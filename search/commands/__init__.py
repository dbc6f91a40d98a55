"""The `awnn` subcommands, one module each (`add_parser(subparsers)`, `run(args)`)."""
from __future__ import annotations

import argparse


def command_parser(sub, name: str, help: str, description: str, examples: list[str]):
    """A subcommand's parser with its one-line help (in `awnn --help`), a
    description and examples (in `awnn NAME --help`)."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
