"""Gemini CLI chats (``~/.gemini/tmp/<project>/chats/session-*.json`` and ``.jsonl``).

Gemini CLI records a chat as one JSON document, rewritten on every update::

    {"sessionId", "projectHash", "startTime", "lastUpdated", "kind"?,
     "messages": [{"id", "timestamp", "type": "user" | "gemini" | "info" |
                   "error" | "warning", "content", "thoughts"?, "tokens"?,
                   "model"?, "toolCalls"?: [{"id", "name", "args", "result",
                   "status", "timestamp", "resultDisplay"?}]}]}

Newer versions append JSON lines instead: a header record with the same
top-level keys, then message records, ``{"$set": {...}}`` updates, and a
message appended again under the same ``id`` once its tool calls finished
(the last copy wins: only what the earlier copies lacked is new).

| record                                  | events                                   |
|-----------------------------------------|------------------------------------------|
| ``user``                                | a user message (``content`` text or ``[{text}]`` parts) |
| ``gemini`` ``content``                  | an assistant message                     |
| ``gemini`` ``toolCalls[]``              | a tool call each (``id``, ``name``, ``args``) |
| a tool call's ``result`` / final ``status`` | its result: the ``functionResponse.response`` ``output`` (or ``error``, or ``resultDisplay``); an error when ``status`` is ``error`` or ``cancelled`` or the response has an ``error`` |
| ``gemini`` ``tokens``                   | usage (``input``, ``output``, ``cached``) |
| ``error``                               | a system message                         |

A ``run_shell_command`` result is Gemini CLI's envelope around the command's
output (packages/core/src/tools/shell.ts): ``Command: …``, ``Directory: …``
(older versions), ``Output: …`` (or ``Stdout:``/``Stderr:``), then ``Error:``,
``Exit Code: N``, ``Signal:``, ``Background PIDs:``, ``Process Group PGID: N``
(older versions write every field, ``(none)`` when empty; newer ones only those
that say something).  The tool's ``status`` is ``success`` whenever the command
ran, whatever its exit code: the result's content is what the command printed
(``(empty)`` is nothing; an ``Error:`` or ``Stderr:`` that says something stays
after it), its exit code is kept as meta ``exit_code``, and a nonzero one is an
error.  The envelope's other fields are not output (the PGID is new each call).

``thoughts``, ``info`` and ``warning`` records are skipped (counted).  Times
are each record's ``timestamp`` (a result's: its call's).

``$set`` and ``$rewindTo``, as Gemini CLI writes and replays them
(google-gemini/gemini-cli 5411f113, packages/core/src/services/
chatRecordingService.ts: ``updateMetadata``, ``updateMessagesFromHistory``,
``rewindTo``, ``loadConversationRecord``):

- ``{"$set": {"messages": [...], "lastUpdated"}}`` is a checkpoint of the whole
  message list, written when the CLI syncs its history into the file (on
  start and resume, after ``/compress`` replaces the history, on a rolled-back
  or cancelled turn, when tool outputs are masked).  The CLI's loader drops
  what it had and rebuilds from the list.  Here each message of the list is
  read as a message record: one seen before under the same ``id`` adds only
  what its earlier copies lacked (the last copy wins), so nothing is emitted
  twice; a message new in the list (the CLI's own synthetic turns) is read
  as any other, except a user turn of the CLI's own context
  (``<session_context>``, ``<hook_context>``: the CLI does not resume them),
  skipped (counted).  Messages the list no longer holds were seen, and stay.
  Entries without a string ``id`` are skipped (counted), as the loader skips
  them, and so are entries of no known ``type`` or time (the rest of the list
  is still read); a ``$set`` that is not an object, or whose ``messages`` is not a list,
  is an error.  A message of the list unknown once the reader has forgotten
  old ids (more than 4096 messages) is skipped (counted), not read as new.
- Any other ``$set`` (``lastUpdated``, ``summary``, ``directories``,
  ``memoryScratchpad``, ``sessionId``) carries no work: skipped (counted).
- ``{"$rewindTo": id}`` drops that message and the later ones from the
  CLI's list; what was emitted stays: skipped (counted).

Parts marked ``thought`` are thoughts, not text (the CLI's history puts a
turn's thoughts in its ``content``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from monitor.events import Event, Kind
from monitor.formats.base import RecordDecoder, RecordError
from monitor.formats.native import parse_ts
from monitor.formats.registry import register_line_format

AGENT = "gemini-cli"
_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
_DONE = frozenset({"success", "error", "cancelled"})
#: Message ids remembered for re-appended copies (bounded: a chat can be endless).
_MEMORY = 4096
#: User turns of Gemini CLI's own context, in a ``$set`` list (``isIgnoredUserContent``).
_CONTEXT = ("<session_context>", "<hook_context>")


def is_chat(document: Any) -> bool:
    """True for a Gemini CLI chat document."""
    return (
        isinstance(document, dict)
        and isinstance(document.get("messages"), list)
        and "projectHash" in document
        and "sessionId" in document
    )


def parts_text(value: Any) -> str:
    """The text of a ``PartListUnion``: a string, or parts with ``text``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p["text"]
            for p in value
            if isinstance(p, dict) and isinstance(p.get("text"), str) and p.get("thought") is not True
        )
    if isinstance(value, dict) and isinstance(value.get("text"), str) and value.get("thought") is not True:
        return str(value["text"])
    return ""


def _response(call: dict[str, Any]) -> tuple[str, bool]:
    """A tool call's output and whether its response says it failed."""
    result = call.get("result")
    parts = result if isinstance(result, list) else [result]
    texts: list[str] = []
    failed = False
    for part in parts:
        response = part.get("functionResponse", {}).get("response") if isinstance(part, dict) else None
        if isinstance(response, dict):
            if response.get("error"):
                failed = True
                texts.append(str(response["error"]))
            elif response.get("output") is not None:
                output = response["output"]
                texts.append(output if isinstance(output, str) else orjson.dumps(output).decode())
        elif isinstance(part, str):
            texts.append(part)
    if not texts and isinstance(call.get("resultDisplay"), str):
        texts.append(call["resultDisplay"])
    return "\n".join(texts), failed


#: Gemini CLI's shell tool, whose result is an envelope of labelled fields.
_SHELL_TOOL = "run_shell_command"
#: Fields the envelope ends with (after the output); ``Error``/``Stderr`` when they say nothing.
_TRAILER = re.compile(
    r"\n(?:Exit Code|Signal|Background PIDs|Process Group PGID): [^\n]*$|\n(?:Error|Stderr): \((?:none|empty)\)$"
)
_EXIT = re.compile(r"\nExit Code: (-?\d+)$")
_LEAD = re.compile(r"(?:Command: .*?\nDirectory: [^\n]*\n)?(?:Output|Stdout): ", re.S)


def shell_output(text: str) -> tuple[str, int | None]:
    """What a ``run_shell_command`` envelope says the command printed, and its exit
    code; ``(text, None)`` for a text that is no envelope."""
    lead = _LEAD.match(text)
    if lead is None or "\nProcess Group PGID: " not in text and "\nExit Code: " not in text:
        return text, None
    body, code = "\n" + text[lead.end() :], None
    while True:
        field = _TRAILER.search(body)
        if field is None:
            break
        found = _EXIT.fullmatch(field.group())
        if found is not None:
            code = int(found.group(1))
        body = body[: field.start()]
    body = body[1:]
    if body == "(empty)" or body.startswith("(empty)\n"):
        body = body[len("(empty)") :].lstrip("\n")
    return body, code


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class GeminiDecoder(RecordDecoder):
    """Decoder of Gemini CLI chat records (a document's messages, or JSON lines)."""

    name = "gemini"

    def __init__(self, source: str, default_session: str):
        super().__init__(source, default_session)
        self.session = default_session
        self.ts: float | None = None
        self.started = False
        #: What was emitted per message id: its text, its usage, its calls, its answered calls.
        self._seen: dict[str, tuple[bool, bool, set[str], set[str]]] = {}
        #: True once an id was dropped from ``_seen`` (a ``$set`` may list it again).
        self._forgotten = False

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        if "projectHash" in record and "sessionId" in record:
            return True
        return record.get("type") in ("user", "gemini") and "id" in record and "timestamp" in record

    def header(self, record: dict[str, Any], line: int | None, now: float) -> Event:
        """The session start a chat's top-level keys give."""
        self.started = True
        meta: dict[str, Any] = {}
        for key, name in (("sessionId", "session_id"), ("projectHash", "project_hash"), ("kind", "kind")):
            if isinstance(record.get(key), str):
                meta[name] = record[key]
        when = record.get("startTime")
        ts = parse_ts(when, now, "startTime") if when is not None else now
        self.ts = self.ts if self.ts is not None else ts
        return Event(
            kind=Kind.SESSION_START,
            session=self.session,
            ts=ts,
            source=self.source,
            line=line,
            agent=AGENT,
            meta=meta,
        )

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        if "projectHash" in record and "sessionId" in record and "type" not in record:
            return [] if self.started else [self.header(record, line, now)]
        if "$set" in record:
            return self._checkpoint(record["$set"], line, now)
        if "$rewindTo" in record and "type" not in record:
            self.skip("$rewindTo")
            return []
        return self._message(record, line, now)

    def _checkpoint(self, update: Any, line: int | None, now: float) -> list[Event]:
        """A ``$set``: the messages of a checkpoint list not emitted yet, else nothing."""
        if not isinstance(update, dict):
            raise RecordError(f"$set: expected an object, got {type(update).__name__}")
        messages = update.get("messages")
        if messages is None:
            self.skip("$set")
            return []
        if not isinstance(messages, list):
            raise RecordError(f"$set: messages: expected a list, got {type(messages).__name__}")
        before = self.ts
        out: list[Event] = []
        for message in messages:
            if not isinstance(message, dict) or not isinstance(message.get("id"), str):
                self.skip("$set message without an id")
            elif message["id"] not in self._seen and self._forgotten:
                self.skip("$set message forgotten")
            elif message.get("type") == "user" and parts_text(message.get("content")).lstrip().startswith(
                _CONTEXT
            ):
                self.skip("$set context")
            else:
                try:
                    out.extend(self._message(message, line, now))
                except RecordError:
                    self.skip("$set message unreadable")
        if before is not None and (self.ts is None or self.ts < before):
            self.ts = before
        return out

    def _message(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        """The events of one message record not emitted for its ``id`` yet."""
        kind = record.get("type")
        if not isinstance(kind, str) or kind not in _TYPES:
            raise RecordError(f"message: expected a type ({', '.join(sorted(_TYPES))}), got {kind!r}")
        if record.get("timestamp") is not None:
            self.ts = parse_ts(record["timestamp"], now, "timestamp")
        ts = self.ts if self.ts is not None else now
        out: list[Event] = []
        if not self.started:
            out.append(self.header({}, None, ts))

        def event(kind: Kind, **fields: Any) -> Event:
            return Event(kind=kind, session=self.session, ts=ts, source=self.source, line=line, **fields)

        given = record.get("id")
        ident = given if isinstance(given, str) else f"line-{line}"
        texted, used, called, answered = self._seen.get(ident, (False, False, set(), set()))
        if len(self._seen) >= _MEMORY and ident not in self._seen:
            self._seen.pop(next(iter(self._seen)))
            self._forgotten = True
        text = parts_text(record.get("content"))
        if kind in ("info", "warning"):
            self.skip(kind)
        elif text.strip() and not texted:
            role = {"user": "user", "gemini": "assistant"}.get(kind, "system")
            out.append(event(Kind.MESSAGE, role=role, content=text))
            texted = True
        if kind == "gemini":
            calls = self._calls(event, record, used, called, answered)
            used = used or any(e.kind is Kind.USAGE for e in calls)
            out.extend(calls)
        self._seen[ident] = (texted, used, called, answered)
        return out

    def _calls(
        self, event: Any, record: dict[str, Any], used: bool, called: set[str], answered: set[str]
    ) -> list[Event]:
        out: list[Event] = []
        tokens = record.get("tokens")
        if (
            isinstance(tokens, dict)
            and not used
            and not called
            and not answered
            and (_int(tokens.get("total")) or 0) > 0
        ):
            cached = _int(tokens.get("cached"))
            meta: dict[str, Any] = {"cached_input_tokens": cached} if cached else {}
            if isinstance(record.get("model"), str):
                meta["model"] = record["model"]
            out.append(
                event(
                    Kind.USAGE,
                    input_tokens=_int(tokens.get("input")),
                    output_tokens=_int(tokens.get("output")),
                    meta=meta,
                )
            )
        calls = record.get("toolCalls")
        for call in calls if isinstance(calls, list) else ():
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                continue
            call_id = str(call.get("id") or f"{call['name']}-{len(called)}")
            if call_id not in called:
                args = call.get("args") if isinstance(call.get("args"), dict) else {}
                out.append(event(Kind.TOOL_CALL, tool=call["name"], args=args, call_id=call_id))
                called.add(call_id)
            status = call.get("status")
            if call_id in answered or (call.get("result") is None and status not in _DONE):
                continue
            content, failed = _response(call)
            facts: dict[str, Any] = {"status": status} if isinstance(status, str) else {}
            if call["name"] == _SHELL_TOOL:
                content, code = shell_output(content)
                if code is not None:
                    facts["exit_code"] = code
                    failed = failed or code != 0
            out.append(
                event(
                    Kind.TOOL_RESULT,
                    tool=call["name"],
                    call_id=call_id,
                    content=content,
                    is_error=failed or status in ("error", "cancelled"),
                    meta=facts,
                )
            )
            answered.add(call_id)
        return out


register_line_format(GeminiDecoder)
