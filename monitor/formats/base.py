"""What every format adapter provides, and how bad input is reported.

A format adapter turns the records of one file (already JSON-decoded, one per
line) into normalized :class:`~monitor.events.Event` objects.  It is stateful
per file (a Codex rollout pairs outputs with calls by ``call_id``; a Claude
transcript's session id comes from its records), so each file gets its own
:class:`RecordDecoder` instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from monitor.events import Event


class RecordError(ValueError):
    """A record that is valid JSON but not a valid event; the message says why."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One piece of bad input, with where it was and why it was skipped."""

    source: str
    line: int | None
    reason: str

    @property
    def where(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


class RecordDecoder:
    """Decodes the records of one file (or connection) of one format."""

    name: ClassVar[str] = ""
    #: The record key whose value, a non-empty string, is the session of
    #: every event decoded from the record (None: known only by decoding).
    session_key: ClassVar[str | None] = None

    def __init__(self, source: str, default_session: str):
        self.source = source
        self.default_session = default_session
        self.skipped: dict[str, int] = {}

    @classmethod
    def sniff(cls, record: dict[str, Any]) -> bool:
        """True when ``record`` looks like this format."""
        raise NotImplementedError

    def decode(self, record: dict[str, Any], line: int | None, now: float) -> list[Event]:
        """The events in one record; raise :class:`RecordError` if it is invalid."""
        raise NotImplementedError

    def skip(self, what: str) -> None:
        """Count a record type that is known but carries nothing to detect."""
        self.skipped[what] = self.skipped.get(what, 0) + 1
