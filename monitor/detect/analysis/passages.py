"""Passages a reply says again and again, not necessarily back to back.

A model that degenerates does not always chant one stretch back to back
(:mod:`monitor.detect.detectors.chanting`): it may write the same edit block
ten times with an empty one between each, cycle "Step 6: update a.ts", "Step
7: update b.ts", "Step 8: update a.ts" … up to step 48, or go round the same
paragraph of reasoning every hundred lines.  Such a reply is cut into
*passages* -- runs of non-blank lines, so a paragraph, a list item written as
one, or a piece of a code block -- and each is normalised the way outcomes are
(every digit dropped, white space squashed, case folded: "Step 6" and "Step 48"
are one passage).  A passage of at least ``min_chars`` that comes back
``repeats`` times in one reply is repeated.

Left alone: short passages (a closing fence, "Done.", a one-line heading), a
passage said twice or three times (a plan restated once, the same import block
in two edits), a passage said once under each new heading (a template's field:
copies are counted within one section, and a heading not written before starts
the next), replies whose passages each differ -- several edits of one
file, a list of steps over different files -- and code quoted again while the
reasoning around it moves on (:class:`Shape`): a copy of a code passage does
not count when the prose since its last copy brings ``min_chars`` characters
of words the reply had not used.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from monitor.text import squash_ws

#: A passage: a run of lines with something on each (a blank line ends it).
_PASSAGE = re.compile(r"(?:[^\n]*\S[^\n]*(?:\n|\Z))+")
_DIGITS = re.compile(r"\d+")


class Repeat(NamedTuple):
    """The passage that came back ``count`` times; ``offset`` is where its
    ``count``-th copy starts in the text."""

    offset: int
    count: int  # type: ignore[assignment]  # (a field named like tuple.count, as Chant's)
    passage: str


def normal(passage: str) -> str:
    """A passage as compared: digits dropped, white space squashed, case folded."""
    return squash_ws(_DIGITS.sub("", passage)).strip().lower()


def _too_short(text: str, min_chars: int, repeats: int, limit: int) -> bool:
    """Whether ``text`` (its first ``limit`` characters) is too short to hold ``repeats``
    passages or lines of ``min_chars`` each: an ASCII text, whose normal form is never
    longer than it (lower-casing some other letters lengthens them: "İ" becomes two)."""
    return min(len(text), limit) < min_chars * repeats and text.isascii()


def repeated_passage(text: str, min_chars: int, repeats: int, limit: int) -> Repeat | None:
    """The first passage of ``text`` (its first ``limit`` characters) to come
    back ``repeats`` times within one section, counted where its ``repeats``-th
    copy starts.  A heading the reply had not written before (outside code)
    starts a section: a field said once under each of a template's headings
    ("**Method:** unit test" under "#### TC-1 …", "#### TC-2 …") counts once.
    A copy of a code passage after new reasoning (:class:`Shape`) is a quote:
    it does not count."""
    if _too_short(text, min_chars, repeats, limit):
        return None
    #: passage -> (copies in its section, that section, the index of its last copy)
    seen: dict[str, tuple[int, int, int]] = {}
    sections = Sections()
    shape = Shape()
    for match in _PASSAGE.finditer(text, 0, min(len(text), limit)):
        passage = match.group()
        section = sections.read(passage)
        key = normal(passage)
        index = shape.add(passage, key)
        if len(key) < min_chars:
            continue
        count, where, last = seen.get(key, (0, section, index))
        if where != section:
            count = 1
        elif not (count and shape.quoted_again(last, index, min_chars)):
            count += 1
        # (else: code quoted again after new reasoning -- a quote, not a circle)
        if count >= repeats:
            return Repeat(match.start(), count, key)
        seen[key] = (count, section, index)
    return None


#: A line shaped like code: a bracket, an operator, or an identifier joined by ``_``,
#: ``.`` or ``::`` (``np.r_``, ``set_output``, ``backup.cpp``).
_CODE_MARK = re.compile(r"[()\[\]{};=<>]|->|::|\w[._]\w")
#: Four plain words in a row (outside inline code), each ending at a space, a
#: punctuation mark or the line's end: a sentence, not code (``for i in range(`` is three).
_PROSE_RUN = re.compile(r"(?<![\w.])(?:[^\W\d_]+(?:'[^\W\d_]+)?[,.;:!?\"]?(?:[ ]+|$)){4}")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_CODE_INDENT = re.compile(r"(?:[ ]{4}|\t)\S")
#: A word, as the new words of reasoning are counted (the text is normalised: no digits).
_WORD = re.compile(r"[^\W\d_][\w']+")


def code_line(line: str) -> bool:
    """Whether a line outside a fenced block is code by its shape: indented
    (4 spaces or a tab), or carrying a bracket, an operator or a joined identifier
    with no run of four plain words outside inline code."""
    if _CODE_INDENT.match(line):
        return True
    if _CODE_MARK.search(line) is None:
        return False
    return _PROSE_RUN.search(_INLINE_CODE.sub(" ", line)) is None


class Shape:
    """Whether each passage of a reply is code, and how much new reasoning the
    reply has written so far.

    A passage is code when most of its lines are: fence lines, lines inside a
    fenced block, or lines shaped like code (:func:`code_line`).  Every word of
    the reply is remembered; ``fresh`` adds up the length of each word its
    prose (the passages that are not code) uses for the first time in the reply.
    Between two copies of a code passage, ``fresh`` grows by at least
    ``min_chars`` when the reasoning around the quote moved on (new terms:
    "decision function", "nextafter"), not when it goes round the quoted line
    with the words it already used ("I want `msubsup` in the replacement").
    A passage's shape is read only when a copy of it comes back (most replies:
    never), and then the passages before it too, in order (:meth:`at`)."""

    __slots__ = ("passages", "fenced", "words", "fresh", "codes")

    def __init__(self) -> None:
        #: The reply's passages so far, each with its normal form.
        self.passages: list[tuple[str, str]] = []
        self.fenced = False
        self.words: set[str] = set()
        #: Of each passage read: whether it is code, and ``fresh`` after it.
        self.codes: list[bool] = []
        self.fresh: list[int] = []

    def add(self, passage: str, key: str) -> int:
        """Note the reply's next passage (normalised: ``key``); its index."""
        self.passages.append((passage, key))
        return len(self.passages) - 1

    def at(self, index: int) -> tuple[bool, int]:
        """Whether passage ``index`` is code, and ``fresh`` after it."""
        while len(self.codes) <= index:
            self.read(*self.passages[len(self.codes)])
        return self.codes[index], self.fresh[index]

    def quoted_again(self, last: int, index: int, min_chars: int) -> bool:
        """Whether passage ``index``, a copy of passage ``last``, is code quoted
        again after at least ``min_chars`` characters of new reasoning."""
        code, fresh = self.at(index)
        return code and fresh - self.at(last)[1] >= min_chars

    def read(self, passage: str, key: str) -> None:
        """Read the next passage (normalised: ``key``): whether it is code, its new words."""
        lines = code = 0
        for line in passage.splitlines():
            lines += 1
            if _FENCE_LINE.match(line):
                self.fenced = not self.fenced
                code += 1
            elif self.fenced or code_line(line):
                code += 1
        is_code = 2 * code > lines
        words = self.words
        fresh = self.fresh[-1] if self.fresh else 0
        if not is_code:  # its words, not the code it quotes inline
            for word in _WORD.findall(_INLINE_CODE.sub(" ", key)):
                if word not in words:
                    words.add(word)
                    fresh += len(word)
        words.update(_WORD.findall(key))
        self.codes.append(is_code)
        self.fresh.append(fresh)


#: A Markdown heading line, and a code fence line.
_HEADING_LINE = re.compile(r"[ ]{0,3}#{1,6}[ \t]+\S")
_FENCE_LINE = re.compile(r"[ ]{0,3}(?:```|~~~)")


class Sections:
    """Which section of a reply its passages are in: a heading not written
    before in the reply, outside fenced code (a ``# comment`` there is code),
    starts the next one."""

    __slots__ = ("number", "fenced", "headings")

    def __init__(self) -> None:
        self.number = 0
        self.fenced = False
        self.headings: set[str] = set()

    def read(self, passage: str) -> int:
        """The section ``passage`` is in, after the headings it writes."""
        if "#" not in passage and "`" not in passage and "~" not in passage:
            return self.number  # (most passages: no line to look at)
        for line in passage.splitlines():
            if _FENCE_LINE.match(line):
                self.fenced = not self.fenced
            elif not self.fenced and _HEADING_LINE.match(line):
                heading = normal(line)
                if heading not in self.headings:
                    self.headings.add(heading)
                    self.number += 1
        return self.number


#: A line that is code or markup, not a sentence: a fence, an indented line,
#: a list item, a table row, a heading, a quote, an edit block's marker.
_NOT_PROSE = re.compile(r"(?:[ ]{4}|\t|\s*(?:[-*+|#>]|\d+[.)]\s|<{4,}|={4,}|>{4,}))")
_FENCE = re.compile(r"\s*(?:```|~~~)")
#: A sentence opens with a word (after a quote at most): not a tree, a rule or a number.
_SENTENCE = re.compile(r"[ ]{0,3}[\"'“‘(]?[^\W\d_]")
_OPENING_PUNCTUATION = re.compile(r"^[\W_]+")


def repeated_line(text: str, min_chars: int, repeats: int, limit: int) -> Repeat | None:
    """The first sentence-line of ``text`` whose opening (its first ``min_chars``
    characters, normalised as passages are, leading quotes dropped) comes back
    ``repeats`` times in one reply: reasoning written without blank lines goes
    round the same sentence ("Please provide the contents of `clamp.py` …" seven
    times in one paragraph, other sentences between).  Lines opening alike back to
    back (a report line per module) count once: a list written without markers.  Code (fenced or indented), list items, table rows,
    headings, quotes and lines that open with no word (a file tree, a rule) are
    never counted, nor lines shorter than ``min_chars``."""
    if _too_short(text, min_chars, repeats, limit):
        return None
    seen: dict[str, int] = {}
    last = ""
    fenced = False
    offset = 0
    end = min(len(text), limit)
    while offset < end:
        stop = text.find("\n", offset, end)
        stop = end if stop < 0 else stop
        line = text[offset:stop]
        start, offset = offset, stop + 1
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced or _NOT_PROSE.match(line) or not _SENTENCE.match(line):
            continue
        key = _OPENING_PUNCTUATION.sub("", normal(line))
        if len(key) < min_chars:
            continue
        key = key[:min_chars]
        if key == last:
            continue  # back to back, with only code or markup between: one list over many items
        last = key
        count = seen.get(key, 0) + 1
        if count >= repeats:
            return Repeat(start, count, key)
        seen[key] = count
    return None
