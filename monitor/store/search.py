"""Sessions matching a text: the history command's ``--search`` and the history screen's box.

Both import it from here (the store layer), so that neither the UI nor the
commands import the other for it.
"""

from __future__ import annotations

from typing import Any

from monitor.store.reader import StoreReader

#: Matching events listed under the sessions table by ``--search``.
MAX_HITS = 200


def search(
    store: StoreReader,
    text: str,
    *,
    agent: str | None = None,
    since: float | None = None,
    level: str | None = None,
    limit: int | None = None,
    as_you_type: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sessions matching ``text`` (their events in the full-text index, or their
    id/agent/source), newest first, and the matching events.  ``as_you_type``:
    the last word may be unfinished (searched as a prefix)."""
    words = text if not as_you_type or text.endswith((" ", "*")) else text + "*"
    hits = store.search_events(words, agent=agent, since=since, level=level, limit=MAX_HITS)
    named = store.list_sessions(agent=agent, since=since, level=level, text=text, limit=None)
    ids = dict.fromkeys([row["id"] for row in named] + [hit["session"] for hit in hits])
    rows = [row for row in (store.get_session(sid) for sid in ids) if row is not None]
    rows.sort(key=lambda row: (-(row.get("last_seen") or 0), row["id"]))
    return (rows[:limit] if limit else rows), hits
