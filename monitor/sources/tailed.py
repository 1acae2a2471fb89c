"""The state kept for one followed file, shared by the reader and the resume logic."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from monitor.formats.lines import LineDecoder
from monitor.framing import LineSplitter

#: Bytes remembered just before the offset: if they change, the file was rewritten.
MARK_BYTES = 32


@dataclass(eq=False)
class TailedFile:
    """The state kept for one followed file (by identity, not by name)."""

    path: str
    ident: tuple[int, int]  # (st_dev, st_ino)
    offset: int
    #: Before the first read: move ``offset`` back ("back") or forward
    #: ("forward") to a line boundary; "" when it is one already.
    align: str = ""
    fd: int | None = None
    splitter: LineSplitter | None = None
    decoder: LineDecoder | None = None
    numbered: bool = True  # False: started too deep into a huge file to count lines
    mtime_ns: int = -1
    mark: bytes = b""
    last_data: float = 0.0  # monotonic time data was last read
    retired_at: float | None = None
    open_error: str = ""  # why it cannot be opened, once reported
    binary: bool = False  # its start is binary data: skipped (one problem) until it is rewritten
    follow: bool = False  # a symbolic link is followed only where the operator named it
    sessions: set[str] = field(default_factory=set)
    #: A stored position to resume from, checked against the file's head first.
    resume: dict[str, Any] | None = None
    head_len: int = 0  # bytes hashed into ``head`` so far (up to HEAD_BYTES)
    head: str = ""
    lines: int = 0
    events: int = 0
    problems: int = 0
    #: Its lane of the shared ingest pump (:mod:`monitor.sources.fair`), made on first use.
    lane: Any = None
