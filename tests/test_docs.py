"""The documentation cannot drift from the code: every ``loopwatch`` command and
flag shown in README.md and docs/*.md exists in the real CLI parser, every
``make`` target in the Makefile, every script or test path on disk, every
relative link (and its #anchor) resolves, and every docs page is linked from
the README.

Only code (fenced blocks and `inline spans`) is read for commands, flags and
paths: prose may say "loopwatch tails agent logs" without meaning a command.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from monitor.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]  # commands and flags are checked here
LINKED = [*PAGES, ROOT / "benchmarks" / "README.md"]  # links and paths here too

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})[^`]*$")
SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# `loopwatch` where a command line starts (a snippet's start, `$ `, after a
# path, a quote, `(`, `;`, `|`, `&&`), not in output text ("the loopwatch entries").
COMMAND = re.compile(r"(?:^\s*|[`(\"';|&]\s*|\$\s+|/)loopwatch[ \t]+(\S+)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
MAKE = re.compile(r"(?<![\w-])make[ \t]+([a-z][\w-]*)")
SCRIPT = re.compile(r"(?<![\w./~$-])((?:benchmarks|screenshots|examples|tests|\.ci)/[\w./*-]*)")
BENCH = re.compile(r"(?<![\w/])(bench_[a-z_]+)\b")


def _code(text: str) -> list[str]:
    """The page's code: each line of a fenced block, and each inline span
    (outside fences, newlines folded: a span may wrap)."""
    snippets, prose, fenced = [], [], None
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fenced is None and fence:
            fenced = fence.group(1)
        elif fenced is not None and fence and fence.group(1).startswith(fenced[0] * len(fenced)):
            fenced = None
        elif fenced is not None:
            snippets.append(line)
        else:
            prose.append(line)
    snippets += [m.group(2).replace("\n", " ") for m in SPAN.finditer("\n".join(prose))]
    return snippets


def _prose(text: str) -> str:
    """The page without its fenced blocks and inline spans (where links live)."""
    kept, fenced = [], None
    for line in text.splitlines():
        fence = FENCE.match(line)
        if fenced is None and fence:
            fenced = fence.group(1)
        elif fenced is not None and fence and fence.group(1).startswith(fenced[0] * len(fenced)):
            fenced = None
        elif fenced is None:
            kept.append(line)
    return SPAN.sub(" ", "\n".join(kept))


def _parsers() -> tuple[dict[str, set[str]], set[str]]:
    """Each subcommand's option strings, and the top-level parser's, from the real CLI."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    commands = {name: set(p._option_string_actions) for name, p in sub.choices.items()}
    return commands, set(parser._option_string_actions)


COMMANDS, TOP = _parsers()
ANY_FLAG = TOP.union(*COMMANDS.values())
# Flags of the benchmark and screenshot scripts, which are not loopwatch's.
SCRIPT_SOURCES = "\n".join(
    p.read_text() for p in [*ROOT.glob("benchmarks/*.py"), ROOT / "screenshots" / "generate.py"]
)


def _page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _uses(snippet: str) -> list[tuple[str, str]]:
    """(command, the text that belongs to it) for each ``loopwatch …`` in a snippet."""
    found = list(COMMAND.finditer(snippet))
    uses = []
    for i, m in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(snippet)
        word = m.group(1).rstrip(",;:`)")
        # `loopwatch PATH…`, `loopwatch ~/logs`, `loopwatch --flag`: the live monitor (watch).
        is_word = re.fullmatch(r"[a-z][a-z-]*", word) is not None
        uses.append((word if is_word else "watch", snippet[m.end(1) if is_word else m.start(1) : end]))
    return uses


def test_the_pages_exist_and_have_code():
    assert DOCS, "docs/*.md is empty"
    assert _uses("".join(_code(README.read_text()))), "the README shows no loopwatch command"


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_command_and_flag_shown_exists(page: Path):
    wrong = []
    for snippet in _code(page.read_text()):
        uses = _uses(snippet)
        for command, rest in uses:
            if command not in COMMANDS:
                wrong.append(f"`loopwatch {command}`: no such command (in {snippet!r})")
                continue
            for flag in FLAG.findall(rest):
                if flag not in COMMANDS[command] and flag not in TOP:
                    wrong.append(f"`loopwatch {command}` has no {flag} (in {snippet!r})")
        if (
            uses
            or "pytest" in snippet
            or not snippet.lstrip().startswith(("-", "[", "python", "benchmarks/", ".venv/bin/python"))
        ):
            continue  # another program's flags (git, sqlite-utils, pytest)
        module = re.search(r"python -m (monitor[\w.]*)", snippet)  # e.g. the demo's agent
        sources = (
            (ROOT / (module.group(1).replace(".", "/") + ".py")).read_text() if module else SCRIPT_SOURCES
        )
        for flag in FLAG.findall(snippet):
            if flag not in ANY_FLAG and flag not in sources:
                wrong.append(f"{flag}: no loopwatch command or script has it (in {snippet!r})")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_every_make_target_shown_exists(page: Path):
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    shown = {t for snippet in _code(page.read_text()) for t in MAKE.findall(snippet)}
    assert shown <= targets, f"not in the Makefile: {sorted(shown - targets)}"


@pytest.mark.parametrize("page", LINKED, ids=_page_id)
def test_every_script_and_test_path_shown_exists(page: Path):
    missing = []
    for snippet in _code(page.read_text()):
        snippet = re.sub(r'"[^"]*"', "", snippet)  # a quoted argument is no path: "pytest tests/api*"
        for path in SCRIPT.findall(snippet):
            path = path.rstrip(".,;:")
            if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                missing.append(path)
        for name in BENCH.findall(snippet):
            if not (ROOT / "benchmarks" / f"{name}.py").exists():
                missing.append(f"benchmarks/{name}.py")
    assert not missing, f"{_page_id(page)} names what does not exist: {missing}"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces as hyphens."""
    anchors = set()
    for line in page.read_text().splitlines():
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            anchors.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", LINKED, ids=_page_id)
def test_every_relative_link_resolves(page: Path):
    broken = []
    for target in LINK.findall(_prose(page.read_text())):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{_page_id(page)}: {broken}"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in LINK.findall(_prose(README.read_text()))}
    unlinked = [_page_id(p) for p in DOCS if p.resolve() not in linked]
    assert not unlinked, f"not linked from README.md: {unlinked}"


def test_the_checks_catch_what_they_are_for():
    """The parsing above finds a wrong command, a wrong flag and a span that wraps."""
    snippets = _code(
        "run `loopwatch scna x` and `loopwatch scan\n--bogus`\n```\nloopwatch watch --headless\n```\n"
    )
    assert [(c, FLAG.findall(rest)) for s in snippets for c, rest in _uses(s)] == [
        ("watch", ["--headless"]),
        ("scna", []),
        ("scan", ["--bogus"]),
    ]
    assert "--bogus" not in COMMANDS["scan"] and "scna" not in COMMANDS
