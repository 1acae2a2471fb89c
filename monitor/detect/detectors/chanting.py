"""Chanting: the same stretch of text repeated over and over in a reply.

A model that degenerates repeats a phrase or a paragraph back to back ("I will
fix the test. I will fix the test. …") until it runs out of tokens, within one
message or across the chunks of a streamed reply.  This detector finds such
*periodic runs* in assistant prose: text that repeats a unit (of up to
``max_period`` characters) back to back so long that a ``window_chars`` (50)
window of it is seen ``min_repeats`` (10) times.  A 33-character sentence
needs 12 copies; a 200-character paragraph 10.  Only one window per
``window_chars`` is sampled, so a unit much shorter than the window may need
up to a window's length more before it is seen ("the " about 26 copies).

Honest repetition that is deliberately *not* flagged:

* text inside fenced code blocks (``` or ~~~), indented code, or an inline
  code span (quoted, not said); text indented under a list item is the item's
  own, not code (a plan item going on with the same two lines is a chant),
  unless it is a nested item or indented once more;
* tables, lists, headings, block quotes, divider lines (``-----``) and
  box-drawing lines are structure, not prose: a run that contains one is cut
  there, so a list whose items share a long prefix -- or even repeat -- and a
  table of similar rows are not chants;
* near-repetition: lines that share a long prefix but differ after it; only
  exact back-to-back repetition is a chant;
* units with fewer than two letters (``0, 0, 0``, ``=====``, ``.....``).

A reply may also go round in circles without repeating back to back: the
same passage (a run of non-blank lines, digits aside, code included) said
``passage_repeats`` times anywhere in one reply, in its answer or in the
reasoning the format kept (``meta["reasoning"]``): see
:mod:`monitor.detect.analysis.passages` for what it leaves alone.

Cost is linear in the text: one window per ``window_chars`` characters is
looked up once (``str.find`` over at most ``max_period + window_chars``
characters); a run found is measured with galloping slice comparisons and the
samples inside it are skipped.  Of a huge message only the head and the tail
are scanned (``max_scan_chars``); across streamed messages only a bounded tail
of the stream is carried over.  A chant is reported when first seen and again
each time it has grown by another ``min_repeats`` copies.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from monitor.detect.analysis.digest import digest
from monitor.detect.analysis.passages import repeated_line, repeated_passage
from monitor.detect.base import Detection, Detector, DetectorSettings, SessionView, evidence, ref
from monitor.events import Event, EventRef, Kind, Level
from monitor.text import squash_ws

#: A fence line opens or closes a fenced code block.
FENCE = re.compile(r"^[ \t]{0,3}(?:```|~~~)", re.MULTILINE)

#: Lines that are structure, not prose (matched at a line start).
STRUCTURAL = re.compile(
    r"""
      [ \t]{0,3}(?:```|~~~)                 # code fence
    | (?:[ ]{4}|\t)                         # indented code
    | [ \t]*(?:[-*+•‣◦▪][ \t]               # bullet list item
             | \d{1,4}[.)][ \t]              # numbered list item
             | \#{1,6}(?:[ \t]|$)            # heading
             | >                             # block quote
             | \|                            # table row
             | \+[-=+]                       # ASCII table border
             | [-=_*~]{3,}[ \t]*$            # divider, setext underline
             )
    | [^\n]*\|[^\n]*\|                       # table row without leading pipe
    | [^\n]*[\u2500-\u259F]                  # box drawing and block elements
    """,
    re.VERBOSE | re.MULTILINE,  # ``$`` is the end of the line, not of the text
)

#: An indented line (code, unless it goes on a list item).
INDENTED = re.compile(r"[ ]{4}|\t")
#: A list item's first line.
LIST_ITEM = re.compile(r"[ \t]{0,3}(?:[-*+•‣◦▪]|\d{1,4}[.)])[ \t]")
#: How far back an indented line looks for the list item it goes on.
ITEM_LOOKBACK = 2000


def line_start(text: str, pos: int) -> int:
    return text.rfind("\n", 0, pos) + 1


def line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def continues_item(text: str, start: int) -> bool:
    """True when the indented line at ``start`` goes on a list item: the
    nearest line above it that is neither blank nor indented (within
    :data:`ITEM_LOOKBACK` characters) is a list item's first line."""
    floor = max(0, start - ITEM_LOOKBACK)
    end = start - 1  # the newline before the line
    while end > floor:
        begin = text.rfind("\n", floor, end) + 1
        if begin == 0 and floor > 0:
            return False  # looked far enough: taken as code
        line = text[begin:end]
        if line.strip() and not INDENTED.match(line):
            return LIST_ITEM.match(line) is not None
        end = begin - 1
    return False


def common_prefix(text: str, a: int, b: int, limit: int) -> int:
    """The largest ``n <= limit`` with ``text[a:a+n] == text[b:b+n]``; galloping
    slice comparisons, so the work is linear in ``n`` and runs in C."""
    done, step = 0, 64
    while done < limit:
        stop = min(limit, done + step)
        if text[a + done : a + stop] == text[b + done : b + stop]:
            done, step = stop, step * 2
            continue
        while stop - done > 1:
            mid = (done + stop) // 2
            if text[a + done : a + mid] == text[b + done : b + mid]:
                done = mid
            else:
                stop = mid
        return done
    return done


def common_suffix(text: str, a: int, b: int, limit: int) -> int:
    """The largest ``n <= limit`` with ``text[a-n:a] == text[b-n:b]``."""
    done, step = 0, 64
    while done < limit:
        stop = min(limit, done + step)
        if text[a - stop : a - done] == text[b - stop : b - done]:
            done, step = stop, step * 2
            continue
        while stop - done > 1:
            mid = (done + stop) // 2
            if text[a - mid : a - done] == text[b - mid : b - done]:
                done = mid
            else:
                stop = mid
        return done
    return done


def canonical_unit(unit: str) -> str:
    """The repeated unit independent of where the run was cut: its smallest
    rotation, white space squashed, lower-cased."""
    doubled = unit + unit
    rotation = min(doubled[i : i + len(unit)] for i in range(len(unit)))
    return squash_ws(rotation).lower()


class Chant(NamedTuple):
    start: int
    end: int
    period: int
    repeats: int  # how often a window of the run recurs in it

    def unit(self, text: str) -> str:
        return text[self.start : self.start + self.period]


@dataclass(frozen=True)
class ChantingSettings(DetectorSettings):
    window_chars: int = 50  # the repeated stretch is at least this long
    min_repeats: int = 10  # times a window must recur back to back
    max_period: int = 400  # longest repeated unit looked for
    max_scan_chars: int = 8000  # of a longer message only head and tail (half each) are scanned
    #: One passage (a run of non-blank lines, digits aside) this many times in one reply, anywhere in it.
    passage_repeats: int = 5
    passage_chars: int = 40  # a passage shorter than this (normalised) is never counted


class ChantFinder:
    """Finds chants in a text; pure and stateless apart from its settings."""

    def __init__(self, window_chars: int = 50, min_repeats: int = 10, max_period: int = 400):
        self.window = max(2, window_chars)
        self.min_repeats = max(2, min_repeats)
        self.max_period = max(1, max_period)

    def seen(self, length: int, period: int) -> int:
        """How often the window recurs in a periodic run of ``length`` characters."""
        return max(0, (length - self.window) // period + 1)

    def runs(self, text: str) -> list[Chant]:
        """Periodic runs long enough to be chants, ignoring structure."""
        # One sample per window length: a run long enough to count has a
        # sampled window inside it (short units need a few extra copies).
        window = step = self.window
        n = len(text)
        found: list[Chant] = []
        i = 0
        last = n - window
        reach = self.max_period + window  # (find() stops at the end of the text by itself)
        while i <= last:
            j = text.find(text[i : i + window], i + 1, i + reach)
            if j < 0:
                i += step
                continue
            period = j - i
            start = i - common_suffix(text, i, j, i)
            end = j + common_prefix(text, i, j, n - j)
            count = self.seen(end - start, period)
            if count >= self.min_repeats:
                found.append(Chant(start, end, period, count))
                i = max(i + step, end - window + 1)
            else:
                i += step
        return found

    def find(
        self, text: str, fence_open: bool = False, first_line: bool | None = None, lo: int = 0
    ) -> list[Chant]:
        """Chants in the prose of ``text``: runs outside code, cut at structural lines.

        ``fence_open`` says whether ``text`` starts inside a code fence;
        ``first_line`` whether its first (partial) line is structural when that
        is known from earlier text.  Runs ending before ``lo`` are not reported.
        """
        out: list[Chant] = []
        fences: list[int] | None = None
        for run in self.runs(text):
            if run.end <= lo:
                continue
            unit = run.unit(text)
            if len(set(unit)) < 2 or sum(ch.isalpha() for ch in unit) < 2:
                continue
            if fences is None:
                fences = [m.start() for m in FENCE.finditer(text)]
            if fence_open ^ (bisect.bisect_left(fences, run.start) % 2 == 1):
                continue  # inside a fenced code block
            if text.count("`", line_start(text, run.start), run.start) % 2 == 1:
                continue  # inside an inline code span: quoted, not said
            trimmed = self._prose(text, run, first_line)
            if trimmed is not None:
                out.append(trimmed)
        return out

    def structural(self, text: str, start: int, first_line: bool | None) -> bool:
        if start == 0 and first_line is not None:
            return first_line
        # Structure shows at the start of a line; bounding the match keeps a
        # 1 MB line without newlines from costing a 1 MB regex scan.
        if STRUCTURAL.match(text, start, start + 256) is None:
            return False
        if not INDENTED.match(text, start) or not continues_item(text, start):
            return True
        # Text indented under a list item is the item's, not code: structural
        # only when what follows the indentation is (a nested item, code).
        body = start + (4 if text[start] == " " else 1)
        return STRUCTURAL.match(text, body, body + 256) is not None

    def _prose(self, text: str, run: Chant, first_line: bool | None) -> Chant | None:
        """The run cut down to prose, or None when structure repeats inside it."""
        start, end, period = run.start, run.end, run.period
        # Lines wholly inside the run repeat every period: the first two periods
        # show every distinct one.  If one is structural, it recurs every
        # period and no prose piece can hold two copies.
        probe_end = min(end, start + 2 * period + 1)
        newline = text.find("\n", start, probe_end)
        while newline >= 0:
            begin = newline + 1
            stop = line_end(text, begin)
            if stop > end:
                break
            if self.structural(text, begin, first_line):
                return None
            newline = text.find("\n", begin, probe_end)
        first = line_start(text, start)
        if self.structural(text, first, first_line):
            start = line_end(text, start) + 1
        last = line_start(text, end - 1) if end > start else start
        if last > start and line_end(text, last) > end and self.structural(text, last, first_line):
            end = last
        count = self.seen(end - start, period)
        if count < self.min_repeats:
            return None
        return Chant(start, end, period, count)


class _Region(NamedTuple):
    text: str
    fence_open: bool  # starts inside a code fence
    first_line: bool | None  # its first (partial) line is structural, when known
    fresh_from: int  # where this message's text starts (before: carried over)


_NO_CARRY = _Region("", False, None, 0)


class Chanting(Detector[ChantingSettings]):
    name = "chanting"
    title = "Chanting"
    Settings = ChantingSettings
    #: Only messages: an event between two shows as a gap in the session's
    #: numbering (``Event.seq``), so the others need not call it.
    kinds = frozenset({Kind.MESSAGE})
    presets = {
        "conservative": {"min_repeats": 15, "passage_repeats": 8},
        "aggressive": {"min_repeats": 6, "passage_repeats": 4},
    }

    def __init__(self, settings: ChantingSettings | None = None):
        super().__init__(settings)
        s = self.settings
        self.finder = ChantFinder(s.window_chars, s.min_repeats, s.max_period)
        #: How much of the stream is carried to the next message: enough to
        #: hold a whole chant of the longest unit.
        self.carry_limit = self.finder.window + self.finder.min_repeats * self.finder.max_period
        self.scan_limit = max(self.finder.window * 4, s.max_scan_chars)
        self.reported: dict[str, int] = {}  # unit digest -> count last reported
        #: The stream's last 6 messages (references: a message may be
        #: megabytes); a list, not a deque (an empty deque still holds a block of 64 slots).
        self.messages: list[EventRef] = []
        #: The ``seq`` a message right after the last one seen would have.
        self.next_seq = -1
        self.reset()

    def reset(self) -> None:
        """Forget the stream: consecutive assistant messages form one.  (Runs
        after every stream: the containers are emptied, not rebuilt.)"""
        self.carry = _NO_CARRY
        #: The latest scanned text (text, fence_open, first_line) whose tail
        #: becomes the carry if the stream goes on (most streams end first).
        self.pending: tuple[str, bool, bool | None] | None = None
        self.blind = False  # lost track of code fences in this stream: stay quiet
        self.active: tuple[str, int] | None = None  # (unit digest, run length) reaching the end
        self.reported.clear()
        self.messages.clear()

    def window(self) -> Sequence[Event | EventRef]:
        return list(self.messages)

    def observe(self, event: Event, view: SessionView) -> list[Detection] | None:
        chants = self._chants(event, view)
        repeated = self._passages(event) if event.role == "assistant" else None
        if repeated and chants:
            return chants + repeated
        return repeated or chants

    def _chants(self, event: Event, view: SessionView) -> list[Detection] | None:
        seq = event.seq
        follows = seq == self.next_seq
        self.next_seq = seq + 1
        assistant = event.role == "assistant"
        if not (follows and assistant):
            if self.messages:
                self.reset()  # anything between two messages ends the stream
            if not assistant:
                return None
        messages = self.messages
        messages.append(ref(event))
        if len(messages) > 6:
            del messages[0]
        text = event.content
        if not text or self.blind:
            return None
        pending = self.pending
        if pending is not None:
            self.pending = None
            self._carry_over(*pending)
        carry = self.carry
        if len(text) <= self.scan_limit:
            scanned = carry.text + text if carry.text else text
            if not self.finder.runs(scanned):  # most messages: no periodic run at all
                self.active = None
                self._keep(scanned, carry.fence_open, carry.first_line)
                return None  # (a similarity of 0 is no news)
        regions, whole = self._regions(text)
        chants, covered = self._measure(regions)
        if whole:
            last = regions[-1]
            self._keep(last.text, last.fence_open, last.first_line)
        else:
            self.blind = True  # the tail was not scanned: later chunks lack context
        if view.keeps_similarity:
            view.note_similarity(self.name, min(1.0, covered / len(text)))
        return self._report(chants) if chants else None

    def _passages(self, event: Event) -> list[Detection] | None:
        """The same passage ``passage_repeats`` times in this reply's answer
        or in the reasoning it printed (:mod:`~monitor.detect.analysis.passages`),
        placed at the file line of the copy that made it a loop when the format says
        where the text starts (``meta["text_line"]``, ``meta["reasoning_line"]``)."""
        s = self.settings
        if s.passage_repeats < 2:
            return None
        meta = event.meta
        texts = [(event.content, meta.get("text_line") if meta else None)]
        if meta and isinstance(meta.get("reasoning"), str):
            texts.insert(0, (meta["reasoning"], meta.get("reasoning_line")))
        limit = max(self.scan_limit, 100_000)
        for text, first_line in texts:
            found = (
                repeated_passage(text, s.passage_chars, s.passage_repeats, limit)
                or repeated_line(text, s.passage_chars, s.passage_repeats, limit)
                if text
                else None
            )
            if found is None:
                continue
            preview = found.passage if len(found.passage) <= 60 else found.passage[:59] + "…"
            detection = Detection(
                detector=self.name,
                level=Level.WARN,
                score=min(1.0, found.count / (2 * s.passage_repeats)),
                message=f"one reply says the same passage {found.count} times: “{preview}”",
                pattern=f"passage:{digest(found.passage)}",
                count=found.count,
                summary=f"wrote the same passage {found.count} times in one reply",
                advice="You are going round in circles inside one reply. Stop, and say it once.",
                evidence=evidence(self.messages),
            )
            if isinstance(first_line, int):
                detection.line = first_line + text.count("\n", 0, found.offset)
            return [detection]
        return None

    def _regions(self, text: str) -> tuple[list[_Region], bool]:
        """What to scan: the carried tail plus the message, or for a huge
        message its head (with the carry) and its tail; and whether the
        message's end was included."""
        carry = self.carry
        if len(text) <= self.scan_limit:
            return [_Region(carry.text + text, carry.fence_open, carry.first_line, len(carry.text))], True
        half = self.scan_limit // 2
        head = _Region(carry.text + text[:half], carry.fence_open, carry.first_line, len(carry.text))
        tail_at = len(text) - half
        # The tail is scanned only when the fence state at its start is known:
        # no fence marker in the skipped middle.  Single-character finds run at
        # memchr speed; counting ``` over 1 MB would not.
        if text.find("`", half, tail_at) >= 0 or text.find("~", half, tail_at) >= 0:
            return [head], False
        fence = carry.fence_open ^ (len(FENCE.findall(text, 0, half)) % 2 == 1)
        first = self.finder.structural(text, line_start(text, tail_at), None)
        return [head, _Region(text[tail_at:], fence, first, 0)], True

    def _measure(self, regions: list[_Region]) -> tuple[dict[str, tuple[int, Chant, str]], int]:
        """The chants per unit digest (largest count wins), and how much
        of the new text they cover."""
        chants: dict[str, tuple[int, Chant, str]] = {}
        covered = 0
        active = None
        for index, region in enumerate(regions):
            for chant in self.finder.find(
                region.text, region.fence_open, region.first_line, lo=region.fresh_from
            ):
                unit = chant.unit(region.text)
                key = digest(canonical_unit(unit))
                length = chant.end - chant.start
                if (
                    index == 0
                    and chant.start < region.fresh_from
                    and self.active is not None
                    and self.active[0] == key
                ):
                    # The run goes on from the previous message of the stream.
                    length = self.active[1] + (chant.end - region.fresh_from)
                count = self.finder.seen(length, chant.period)
                covered += chant.end - max(chant.start, region.fresh_from)
                if key not in chants or count > chants[key][0]:
                    chants[key] = (count, chant, unit)
                if index == len(regions) - 1 and chant.end == len(region.text):
                    active = (key, length)
        self.active = active
        return chants, covered

    def _report(self, chants: dict[str, tuple[int, Chant, str]]) -> list[Detection]:
        """A detection per chant first seen, or grown by another ``min_repeats``."""
        found = []
        step = self.finder.min_repeats
        for key, (count, chant, unit) in chants.items():
            if count < self.reported.get(key, 0) + step:
                continue
            self.reported[key] = count
            if len(self.reported) > 32:
                self.reported.pop(next(iter(self.reported)))
            preview = squash_ws(unit)
            preview = preview if len(preview) <= 60 else preview[:59] + "…"
            found.append(
                Detection(
                    detector=self.name,
                    level=Level.WARN,
                    score=min(1.0, count / (2 * step)),
                    message=(
                        f"the same {max(chant.period, self.finder.window)}-character stretch "
                        f"seen {count} times back to back: “{preview}”"
                    ),
                    pattern=f"chant:{key}",
                    count=count,
                    summary=f"repeated the same passage {count} times in a row in one reply",
                    advice="You are repeating yourself word for word. Stop, and say it once.",
                    evidence=evidence(self.messages),
                )
            )
        return found

    def _keep(self, text: str, fence_open: bool, first_line: bool | None) -> None:
        """What :meth:`_carry_over` would keep, cut now only when it is longer
        than the carry may be (then the text is not held)."""
        if len(text) <= self.carry_limit:
            self.pending = (text, fence_open, first_line)
        else:
            self._carry_over(text, fence_open, first_line)

    def _carry_over(self, text: str, fence_open: bool, first_line: bool | None) -> None:
        """Keep the tail of the stream (``text``, which starts inside a code
        fence or not and with a structural line or not) for the next message,
        starting at a line start when one is near, with the fence state there."""
        if len(text) <= self.carry_limit:
            self.carry = _Region(text, fence_open, first_line, 0)
            return
        cut = len(text) - self.carry_limit
        newline = text.find("\n", cut, cut + 256)
        if newline >= 0:
            start, first = newline + 1, None
        else:
            start = cut
            first = self.finder.structural(text, line_start(text, cut), first_line)
        opened = len(FENCE.findall(text, 0, start))
        self.carry = _Region(text[start:], fence_open ^ (opened % 2 == 1), first, 0)
