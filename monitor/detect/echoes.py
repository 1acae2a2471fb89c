"""One assistant message (or compaction) reported twice, by a hook and by the transcript.

Claude Code's ``Stop`` (and ``SubagentStop``) hook carries the turn's last
assistant message (``last_assistant_message``), which a hook-only session
needs to see assistant text at all; the transcript, when it is tailed too,
has the same message.  The engine drops calls by id, but a message has no id
both copies share, so the rule is plain: the hook's copy is marked
``meta["via"] = "hook"`` (:mod:`monitor.hooks`; another path that copies
what a transcript holds, such as OTLP, names itself there too), and a message
whose text (its whitespace squashed, the first :data:`COMPARED` characters)
equals one *from another path* within
:data:`WINDOW_SECONDS` of event time is the same message, dropped; each copy
matches once.  Two equal messages from the same path are never merged (an
agent that says the same thing again is what ``chanting`` looks for).  A
compaction (``PostCompact`` and the transcript's ``compact_boundary``) is
matched the same way, within :data:`COMPACTION_SECONDS`.
"""

from __future__ import annotations

from collections import deque

from monitor.events import COMPACTION, Event

#: How far apart (event time) two copies of one message may be.
WINDOW_SECONDS = 600.0
#: ... and of one compaction (an agent compacts minutes apart at the very least).
COMPACTION_SECONDS = 120.0
#: Messages remembered per session.
REMEMBERED = 16
#: Characters of a message compared (whitespace squashed): bounded work for a 10 MB
#: message, and the hook's copy of a long one is clipped (head and tail kept) anyway.
COMPARED = 4000


class Echoes:
    """A session's latest assistant messages: (hash of the text, the path it came by
    -- ``meta["via"]``, None for a transcript --, event time); a hash, not the
    text, keeps it small."""

    __slots__ = ("recent",)

    def __init__(self) -> None:
        self.recent: deque[tuple[int, str | None, float]] = deque(maxlen=REMEMBERED)

    def repeated(self, event: Event) -> bool:
        """Whether ``event`` is the other path's copy of a message already taken
        (then forgotten: a third copy is taken); else it is remembered."""
        if event.kind is COMPACTION:
            key, window = 0, COMPACTION_SECONDS
        else:
            text = " ".join(event.content[: 2 * COMPARED].split())[:COMPARED]
            if not text:
                return False
            key, window = hash(text) or 1, WINDOW_SECONDS
        via = event.meta.get("via") if event.meta else None
        for index, (seen, seen_via, ts) in enumerate(self.recent):
            if seen_via != via and seen == key and abs(event.ts - ts) <= window:
                del self.recent[index]
                return True
        self.recent.append((key, via, event.ts))
        return False
