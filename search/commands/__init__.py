"""The `awnn` subcommands, one module each (`add_parser(subparsers)`, `run(args)`)."""
from __future__ import annotations

import argparse
import difflib


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that never takes a prefix of a flag for the flag
    (`--strategie` is not `--strategies`): `allow_abbrev=False` on the `awnn`
    parser and, through `parser_class`, on every subcommand's parser."""

    def __init__(self, *args, **kwargs):
        self.long_flags: list[str] = []  # every --flag of this parser, its groups' included (for `unrecognized`)
        self.options: list[argparse.Action] = []  # every option's Action, its groups' included (search/cli.py `_empty_values`)
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def _recorded(self, add):
        def add_argument(*args, **kwargs):
            action = add(*args, **kwargs)  # (add_argument returns the Action: public API)
            self.long_flags.extend(s for s in action.option_strings if s.startswith("--"))
            if action.option_strings:
                self.options.append(action)
            return action
        return add_argument

    def add_argument(self, *args, **kwargs):
        return self._recorded(super().add_argument)(*args, **kwargs)

    def add_argument_group(self, *args, **kwargs):
        group = super().add_argument_group(*args, **kwargs)
        group.add_argument = self._recorded(group.add_argument)
        return group

    def add_mutually_exclusive_group(self, *args, **kwargs):
        group = super().add_mutually_exclusive_group(*args, **kwargs)
        group.add_argument = self._recorded(group.add_argument)
        return group


def unrecognized(parser: argparse.ArgumentParser, extras: list[str]) -> str:
    """argparse's `unrecognized arguments: ...`, with the closest flags of
    `parser` for each unknown one (`--strategie` -> `--strategies`)."""
    flags = list(getattr(parser, "long_flags", ()))
    hints = []
    for token in extras:
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            close = difflib.get_close_matches(name, flags, n=1)
            if close:
                hints.append(f"{name}: did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extras)}" + (f" ({'; '.join(hints)})" if hints else "")


def comma_list(flag: str, text: str) -> list[str]:
    """The items of a comma-separated option (`--strategies fixed,awnn`),
    stripped; an empty item is refused, naming the flag: `--strategies
    "$FIRST,awnn"` with the variable unset is no list of one."""
    from ..errors import OptionError

    items = [s.strip() for s in text.split(",")]
    for i, item in enumerate(items):
        if not item:
            raise OptionError(f"{flag}: expected comma-separated names, found an empty item (item {i + 1} of {len(items)} "
                              f"in {text!r}: a stray comma, or an unset shell variable?)")
    return items


def column_option(flag: str, text: str) -> list[str]:
    """The column names of a column-list option (`--drop-columns id,"Name, full"`: awnn/config.py's COLUMNS_FORMAT);
    what is wrong with it (an empty item, a quote left open) is refused, naming the flag."""
    from awnn.config import COLUMNS_FORMAT, column_list

    from ..errors import OptionError

    try:
        return column_list(text)
    except ValueError as e:
        empty = str(e).startswith("an empty column name")
        raise OptionError(f"{flag}: expected comma-separated names, found an empty item {str(e)[len('an empty column name '):]} in {text!r}"
                          if empty else f"{flag}: {e} in {text!r}; expected {COLUMNS_FORMAT}") from None


def data_root_option(text: str) -> str:
    """`--data-root`'s value, refused where it is a URL (read as a relative path, it was reported missing under the
    working folder as `./https:/...`)."""
    from awnn.data.checks import url_problem

    from ..errors import OptionError

    url = url_problem(text)
    if url:
        raise OptionError(f"--data-root {text}: {url}")
    return text


def command_parser(sub, name: str, help: str, description: str, examples: list[str]):
    """A subcommand's parser with its one-line help (in `awnn --help`), a
    description and examples (in `awnn NAME --help`); no flag abbreviations."""
    epilog = "examples:\n" + "\n".join(f"  {e}" for e in examples)
    return sub.add_parser(name, help=help, description=description, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter,
                          allow_abbrev=False)
