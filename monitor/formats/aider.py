"""Aider chat histories (``.aider.chat.history.md``): Markdown, one file a project.

Aider appends to ``.aider.chat.history.md`` in the repository it works in
(``--chat-history-file`` moves it).  Each run starts with ``# aider chat
started at YYYY-MM-DD HH:MM:SS`` (local time) and is one session, named
``<project>@<start>`` (the project is the file's folder).  What follows:

* ``#### `` lines are what the person typed: a user message.  ``/run cmd``,
  ``/test cmd`` and ``!cmd`` are a shell call (tool ``shell``, args
  ``{"command": …}``) answered by the ``>`` lines after them (a ``/test``
  whose output aider offers to add failed: aider asks only then); other
  ``/commands`` (``/add``, ``/ask`` …) are skipped, and ``<blank>`` too;
  a ``/command`` line's block goes on with what was typed after it (aider
  repeats an ``/ask`` question as a ``####`` line): that is the message;
* ``>`` lines are aider's own output: the person answering ``Add file to
  the chat?`` with yes is a user message (``Added to the chat: F, …``); ``Tokens: … sent, … received. Cost:
  $… message`` is usage; ``Applied edit to F`` and the edit-format failures
  (``The LLM did not conform to the edit format``, ``SEARCH/REPLACE block
  failed to match``, ``Malformed``) and lint / test failures (``Attempt to
  fix lint errors?``, ``… test errors?``) are the result of the assistant's
  edit; ``Running cmd`` is a shell call the model suggested (its output is
  not in the file: the result is empty and marked ``meta["unrecorded"]``);
  aider's own errors outside an edit or a command (``litellm.NotFoundError:
  …``, ``Model … has hit a token limit!``) are a ``system`` message;
* any other text is the assistant's answer: a message (without the
  ``<thinking-content-…>`` reasoning some models print: that is kept in the
  event's ``meta["reasoning"]``, from the file line ``meta["reasoning_line"]``;
  ``meta["text_line"]`` is the line the answer starts at), and when it holds
  edit blocks (``<<<<<<< SEARCH``) or aider reports an edit, a tool call
  ``edit`` with args ``{"files": [...], "edits": <the blocks>}`` (in the
  whole-file format, the answer is the edit).

The ``line`` of an event is the 1-based line of the file where its block
starts.  There are no times but the start of a run: the events of a run are
one second apart from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.events import Event, Kind
from monitor.formats.base import Problem
from monitor.formats.compressed import plain_path, read_all
from monitor.formats.native import parse_ts

AGENT = "aider"
HISTORY = ".aider.chat.history.md"
_START = "# aider chat started at "
_TOKENS = re.compile(r"\ATokens: ([\d.]+)(k?) sent, ([\d.]+)(k?) received\.(?: Cost: \$([\d.]+) message)?")
_MODEL = re.compile(r"\A(?:Main model|Model): (\S+)")
_APPLIED = re.compile(r"\AApplied edit to (.+)")
_RUNNING = re.compile(r"\ARunning (.+)")
#: Reasoning some models print (aider keeps it in the history): not the answer.
_THINKING = re.compile(r"<thinking-content-(\w+)>.*?</thinking-content-\1>", re.S)
#: Of the reasoning only this much is kept (in the event's ``meta``).
REASONING_CHARS = 100_000
_FILE_BEFORE_FENCE = re.compile(r"\A(?=\S*[./])[\w./\\~-]+\Z")
_FAILED_EDIT = (
    "The LLM did not conform to the edit format",
    "SEARCH/REPLACE block failed to match",
    "SEARCH/REPLACE blocks failed to match",
    "Malformed",
    "Attempt to fix lint errors?",
    "Fix lint errors in",
    "Attempt to fix test errors?",
)
_SHELL_COMMANDS = ("/run ", "/test ", "!")
#: Aider's own errors, outside an edit or a command: the model call failed
#: (``litellm.NotFoundError: …``, ``Model … has hit a token limit!``).
_HARNESS_ERROR = re.compile(r"\A(?:litellm\.\w+|[\w.]*(?:Error|Exception)\b|Model .* has hit a token limit)")


def is_history(path: Path, head: bytes) -> bool:
    """True for an Aider chat history (by its name, or a ``.md`` starting so)."""
    if path.name.endswith(HISTORY):
        return True
    return path.suffix == ".md" and head.lstrip()[: len(_START)] == _START.encode()


@dataclass
class _Block:
    kind: str  # "user", "tool" (> lines) or "text"
    line: int
    lines: list[str] = field(default_factory=list)


def _added_files(lines: list[str]) -> list[str]:
    """The files the person agreed to add to the chat in a ``>`` block: each
    ``Add file to the chat? (Y)es/(N)o… [Yes]: y`` (or ``a``, all) after the file's line."""
    added: list[str] = []
    for before, line in zip(lines, lines[1:], strict=False):
        if line.strip().startswith("Add file to the chat?"):
            answer = line.rsplit(":", 1)[-1].strip().lower()
            if answer in ("y", "yes", "a", "all") and before.strip():
                added.append(before.strip())
    return added[:20]


def _blocks(text: str) -> list[_Block | tuple[int, str]]:
    """The file cut into blocks, a ``(line, start time text)`` at each run's start."""
    out: list[_Block | tuple[int, str]] = []
    block: _Block | None = None
    # Lines as an editor numbers them: only a newline ends one (str.splitlines also
    # splits at form feeds and other separators that agents' output carries).
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if line.startswith(_START):
            out.append((number, line[len(_START) :].strip()))
            block = None
            continue
        if line.startswith("####"):
            kind, body = "user", line[5:] if line.startswith("#### ") else line[4:]
        elif line == ">" or line.startswith("> "):
            kind, body = "tool", line[2:]
        else:
            kind, body = "text", raw
        if block is None or block.kind != kind:
            if kind == "text" and not body.strip() and (block is None or block.kind != "text"):
                continue  # blank lines between blocks
            block = _Block(kind, number)
            out.append(block)
        block.lines.append(body)
    return out


def _number(value: str, kilo: str) -> int:
    return int(float(value) * (1000 if kilo else 1))


class _Run:
    """The events of one run (one ``# aider chat started at``)."""

    def __init__(self, source: str, session: str, start: float, line: int):
        self.source = source
        self.session = session
        self.clock = start
        self.events: list[Event] = []
        self.opening = Event(
            kind=Kind.SESSION_START, session=session, ts=start, source=source, line=line, agent=AGENT
        )
        self.calls = 0
        #: The shell command typed (``/run``, ``/test``) waiting for aider's output.
        self.typed: tuple[str, str] | None = None
        #: The assistant's edit blocks (files, blocks text) waiting for aider's verdict.
        self.edit: tuple[list[str], str] | None = None

    def event(self, kind: Kind, line: int, **fields: Any) -> Event:
        self.clock += 1.0
        made = Event(kind=kind, session=self.session, ts=self.clock, source=self.source, line=line, **fields)
        self.events.append(made)
        return made

    def call(
        self, line: int, tool: str, args: dict[str, Any], content: str, error: bool, recorded: bool = True
    ) -> None:
        """A call and its result; a result the file does not hold (``recorded`` false:
        a suggested command's output) is marked ``meta["unrecorded"]``."""
        self.calls += 1
        call_id = f"aider-{self.calls}"
        self.event(Kind.TOOL_CALL, line, tool=tool, args=args, call_id=call_id)
        meta = {} if recorded else {"unrecorded": True}
        self.event(
            Kind.TOOL_RESULT, line, tool=tool, call_id=call_id, content=content, is_error=error, meta=meta
        )

    def user(self, block: _Block) -> None:
        text = "\n".join(block.lines).strip()
        if not text or text == "<blank>":
            return
        if text.startswith(_SHELL_COMMANDS):
            command = text[1:] if text.startswith("!") else text.split(" ", 1)[1]
            self.typed = ("test" if text.startswith("/test ") else "run", command.strip())
            return
        if text.startswith("/"):
            # /add, /drop, /ask …: the command is skipped, what was typed after it in the
            # same block is the message (aider repeats an /ask question as a #### line).
            typed = [line for line in block.lines if line.strip() and not line.startswith("/")]
            text = "\n".join(typed).strip()
            if not text or text.startswith(_SHELL_COMMANDS):
                return
        self.event(Kind.MESSAGE, block.line, role="user", content=text)

    def text(self, block: _Block) -> None:
        joined = "\n".join(block.lines)
        text = _THINKING.sub("", joined).strip()
        if not text:
            return
        self.event(
            Kind.MESSAGE,
            block.line,
            role="assistant",
            content=text,
            meta=_text_meta(joined, text, block.line),
        )
        files = sorted(
            {
                before.strip()
                for before, after in zip(block.lines, block.lines[1:], strict=False)
                if after.strip().startswith(("<<<<<<< SEARCH", "```"))
                and _FILE_BEFORE_FENCE.match(before.strip())
            }
        )
        if "<<<<<<< SEARCH" in text:
            self.edit = (files, text[text.find("<<<<<<< SEARCH") :])
        else:  # the whole-file format: the answer is the edit, if aider applies one
            self.edit = (files, text) if "```" in text else None

    def tool(self, block: _Block) -> None:
        lines = [line.strip() for line in block.lines if line.strip()]
        content = "\n".join(lines)
        calls = self.calls
        if self.typed is not None:
            kind, command = self.typed
            self.typed = None
            added = any(line.startswith("Add") and "output to the chat" in line for line in lines)
            self.call(block.line, "shell", {"command": command}, content, kind == "test" and added)
        files_added = _added_files(block.lines)
        if files_added:
            # The person said yes to "Add file to the chat?": the model's next reply
            # answers new input (the files), as after a typed message.
            self.event(
                Kind.MESSAGE, block.line, role="user", content="Added to the chat: " + ", ".join(files_added)
            )
        applied: list[str] = []
        failed = [line for line in lines if line.startswith(_FAILED_EDIT) or "failed to match" in line]
        for line in lines:
            tokens = _TOKENS.match(line)
            if tokens is not None:
                self.event(
                    Kind.USAGE,
                    block.line,
                    input_tokens=_number(tokens.group(1), tokens.group(2)),
                    output_tokens=_number(tokens.group(3), tokens.group(4)),
                    cost_usd=float(tokens.group(5)) if tokens.group(5) else None,
                )
            model = _MODEL.match(line)
            if model is not None and "model" not in self.opening.meta:
                self.opening.meta["model"] = model.group(1)
            match = _APPLIED.match(line)
            if match is not None:
                applied.append(match.group(1))
        pending, self.edit = self.edit, None
        if pending is not None and not (applied or failed) and "<<<<<<< SEARCH" not in pending[1]:
            pending = None  # a fenced snippet aider did not take as an edit
        if pending is not None or applied or failed:
            files, blocks = pending if pending is not None else ([], "")
            verdict = [line for line in lines if _APPLIED.match(line) or line in failed]
            self.call(
                block.line,
                "edit",
                {"files": files or sorted(set(applied)), "edits": blocks},
                "\n".join(verdict) or content,
                bool(failed),
            )
        for line in lines:
            running = _RUNNING.match(line)
            if running is not None:
                self.call(block.line, "shell", {"command": running.group(1)}, "", False, recorded=False)
        errors = [line for line in lines if _HARNESS_ERROR.match(line)]
        if errors and self.calls == calls:
            # Aider's own error, answering no call: the harness talking.
            self.event(Kind.MESSAGE, block.line, role="system", content="\n".join(errors))


def _text_meta(joined: str, text: str, line: int) -> dict[str, Any]:
    """Where the answer starts in the file (``text_line``, when the answer is
    one stretch of the block), and the reasoning the model printed before or
    around it (``reasoning``, its first ``REASONING_CHARS``, from the file line
    ``reasoning_line``): not the answer, but a loop in it is a loop."""
    meta: dict[str, Any] = {}
    at = joined.find(text)
    if at >= 0:
        meta["text_line"] = line + joined.count("\n", 0, at)
    thinking = [m for m in _THINKING.finditer(joined)]
    if thinking:
        start, end = thinking[0].start(), thinking[-1].end()
        meta["reasoning"] = joined[start : min(end, start + REASONING_CHARS)]
        meta["reasoning_line"] = line + joined.count("\n", 0, start)
    return meta


def session_base(path: Path) -> str:
    """A history's sessions are named after its project (the folder it is in)."""
    if path.name.endswith(HISTORY) and path.parent.name:
        return path.parent.name
    return path.stem or "aider"


def load(path: Path, base: str | None = None) -> tuple[list[Event], list[Problem]]:
    """Every run of an Aider history, a session each."""
    source = str(path)
    raw, damage = read_all(path)  # OSError propagates: the caller reports unreadable paths
    problems: list[Problem] = [] if damage is None else [Problem(source, None, damage)]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = raw.decode("utf-8", errors="replace")
        problems.append(Problem(source, None, f"invalid UTF-8 at byte {exc.start}, replaced with U+FFFD"))
    name = base or session_base(plain_path(path))
    runs: list[_Run] = []
    seen: dict[str, int] = {}
    run: _Run | None = None
    for item in _blocks(text):
        if isinstance(item, tuple):
            line, when = item
            try:
                start = parse_ts(when.replace(" ", "T"), 0.0, "start")
            except ValueError:
                problems.append(Problem(source, line, f"start time {when[:40]!r} is not a date"))
                start = runs[-1].clock + 1.0 if runs else 0.0
            session = f"{name}@{when.replace(' ', 'T')}"
            seen[session] = seen.get(session, 0) + 1
            if seen[session] > 1:
                session = f"{session}~{seen[session]}"
            run = _Run(source, session, start, line)
            runs.append(run)
            continue
        if run is None:  # text before the first run: a history cut at its start
            run = _Run(source, name, 0.0, 1)
            runs.append(run)
        read = {"user": run.user, "text": run.text, "tool": run.tool}[item.kind]
        read(item)
    if not runs and text.strip():
        problems.append(Problem(source, None, "no '# aider chat started at' line: not an Aider chat history"))
    events: list[Event] = []
    for each in runs:
        events.append(each.opening)
        events.extend(each.events)
    return events, problems
