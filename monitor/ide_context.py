"""What a person typed, apart from the editor state Codex's IDE extension puts before it.

The extension opens each user message with "# Context from my IDE setup:" (the
active file, the open tabs: the same on every turn), then "## My request for
Codex:" and the request.  The rollout reader and the Codex hook both cut it, so
three different requests are not "the same message" three times.  Kept apart
from monitor.formats so the hook, which runs at every call, imports nothing more.
"""

from __future__ import annotations

IDE_CONTEXT = "# Context from my IDE setup:"
IDE_REQUEST = "## My request for Codex:"


def typed_request(text: str) -> tuple[str, str]:
    """(what the person typed, the IDE context before it) of a user message;
    a message without the extension's two headings is all request."""
    if not text.startswith(IDE_CONTEXT):
        return text, ""
    context, found, request = text.partition(IDE_REQUEST)
    if not found:
        return text, ""
    return request.strip(), context.strip()
