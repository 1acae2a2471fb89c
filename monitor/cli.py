"""The ``loopwatch`` command line.

Each subcommand lives in ``monitor/commands/<name>.py`` with ``HELP``,
``configure(parser)`` and ``run(args) -> int``; this module only assembles them.
With no subcommand, loopwatch opens the live monitor (``watch``).

Exit status: 0 nothing reached ``warn``; 1 something did; 2 bad usage, an
unreadable path or an invalid config (with a message on stderr).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn

from monitor import __version__
from monitor.commands import EXIT_USAGE

#: Subcommand name -> module under monitor.commands (imported lazily-light:
#: command modules must not import Textual at import time).
COMMANDS: dict[str, str] = {
    "scan": "scan",
    "watch": "watch",
    "demo": "demo",
    "history": "history",
    "show": "show",
    "open": "open_session",
    "eval": "eval",
    "hook": "hook",
    "install-hook": "install_hook",
    "doctor": "doctor",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep the message short
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="loopwatch",
        description="Watch AI agents and catch them when they loop.",
    )
    parser.add_argument("--version", action="version", version=f"loopwatch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"monitor.commands.{module_name}")
        command = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.configure(command)
        command.set_defaults(_run=module.run)
    return parser


def _not_a_command(word: str) -> str | None:
    """Why ``loopwatch WORD …`` is not ``loopwatch watch WORD …`` (a mistyped
    command), or None when WORD may be an option, an existing path or a glob."""
    if word.startswith("-") or any(c in word for c in "*?[") or os.path.lexists(os.path.expanduser(word)):
        return None
    import difflib  # here, not at the top: every hook call imports this module

    guess = difflib.get_close_matches(word, list(COMMANDS), n=1)
    return (
        f"{word!r} is neither a command nor an existing path"
        + (f"; did you mean `loopwatch {guess[0]}`?" if guess else "")
        + f" (commands: {', '.join(COMMANDS)}; to watch a file that does not exist yet: "
        f"`loopwatch watch {word}`)"
    )


#: Options whose value is free text a user may start with '-' (``history --search -error``):
#: argparse would take it for an option.
FREE_TEXT_OPTIONS = ("--search",)


def free_text(argv: list[str]) -> list[str]:
    """``--search -error`` as ``--search=-error``, which argparse reads as the value."""
    out: list[str] = []
    index = 0
    while index < len(argv):
        word = argv[index]
        if word == "--":
            out += argv[index:]
            break
        if word in FREE_TEXT_OPTIONS and index + 1 < len(argv):
            out.append(f"{word}={argv[index + 1]}")
            index += 2
            continue
        out.append(word)
        index += 1
    return out


def escape_output(*, as_json: bool) -> None:
    """Every text the commands write shows agent data literally: session ids,
    tool names, content and file names can hold terminal escapes (OSC 52 sets
    the clipboard) and bidi overrides.  JSON keeps its values, escaped further
    (:func:`monitor.text.json_printable`).  The TUI writes to the terminal
    through its own driver (``sys.__stderr__``), not through these."""
    from monitor.text import PrintableStream

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is None:
            continue
        stream = getattr(stream, "unescaped", stream)
        setattr(sys, name, PrintableStream(stream, as_json=as_json and name == "stdout"))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["hook"]:
        # Agents run this on every tool call: skip importing the other commands.
        from monitor.commands.hook import main as hook_main

        return hook_main(argv[1:])
    streams = sys.stdout, sys.stderr
    escape_output(as_json=False)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    parser = build_parser()
    # Bare ``loopwatch`` (or ``loopwatch PATH…``) opens the live monitor.
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        problem = _not_a_command(argv[0]) if argv else None
        if problem:
            print(f"loopwatch: {problem}", file=sys.stderr)
            return EXIT_USAGE
        argv = ["watch", *argv]
    args = parser.parse_args(free_text(argv))
    escape_output(as_json=bool(getattr(args, "json", False)) or getattr(args, "format", None) == "json")
    run = getattr(args, "_run", None)
    if run is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(run(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
