"""Subcommands of the ``loopwatch`` CLI, one module each.

Each module provides ``HELP``, ``configure(parser)`` and ``run(args) -> int``
and must stay cheap to import (no Textual at module level).
"""

#: Exit status for bad usage, an unreadable path or an invalid config (argparse uses 2 too).
EXIT_USAGE = 2
