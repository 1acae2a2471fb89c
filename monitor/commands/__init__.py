"""Subcommands of the ``loopwatch`` CLI, one module each.

Each module provides ``HELP``, ``configure(parser)`` and ``run(args) -> int``
and must stay cheap to import (no Textual at module level).
"""
