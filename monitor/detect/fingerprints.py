"""Call fingerprints and outcome classes shared by the call detectors.

A *fingerprint* is looser than the exact call key: the tool name plus its
primary arguments only (design note 003), with shell reads of one file through
``cat`` / ``head`` / ``tail`` / ``less`` / ``sed -n`` folded into
``tool:file_read:PATH``.  An *outcome* says whether a result carries
information: an empty or "done" acknowledgement of one command run over many
items is not evidence of being stuck, an error or a "no matches" is.
"""

from __future__ import annotations

import re
import shlex
from typing import Any

from monitor.events import Event
from monitor.text import canonical_args, squash_ws

PRIMARY_KEYS = ("path", "file_path", "command", "cmd", "pattern", "query", "url", "content",
                "filename", "offset", "limit")
COMMAND_KEYS = ("command", "cmd")
FILE_READERS = frozenset({"cat", "head", "tail", "less", "more", "bat"})
_READ_PROGRAMS = FILE_READERS | {"sed"}
_SHELL_META = re.compile(r"[|;&<>`]|\$\(")

#: Acknowledgements that say "it worked" and nothing else.
_ACK = re.compile(
    r"^(?:ok|okay|done|success(?:ful(?:ly)?)?|true|none|null|\{\}|\[\]|"
    r"(?:the )?file .{0,200}? (?:has been |was )?(?:updated|created|written|saved|edited|modified)"
    r"(?: successfully)?\.?.*|"
    r"(?:successfully )?(?:wrote|written|saved|updated|created|applied|edited).{0,200}|"
    r"exit code:? 0|process exited with code 0)\.?$",
    re.IGNORECASE | re.DOTALL,
)
#: Words that make a result read as a failure (checked on lower-cased text
#: with ``in``, which is an order of magnitude cheaper than a regex here).
_FAILURE_WORDS = ("error", "exception", "traceback", "not found", "no such", "cannot", "can't",
                  "failed", "failure", "denied", "invalid", "no matches", "no results",
                  "0 results", "timed out", "timeout", "refused")
_NONZERO_EXIT = re.compile(r"exit (?:code|status):? ?[1-9]")


def _command_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        # Codex: ["bash", "-lc", "cat foo"] — the script is the last element.
        if len(value) >= 3 and value[0].endswith("sh") and value[1] in ("-c", "-lc", "-ic"):
            return value[-1]
        return " ".join(value)
    return None


def shell_file_read(command: str) -> str | None:
    """The file a simple shell read of one file targets, else ``None``.

    ``cat foo.py``, ``head -n 50 foo.py``, ``tail -f log`` and
    ``sed -n '1,80p' foo.py`` all read one file; anything with pipes,
    redirects, ``;`` or several files does not fold."""
    head = command.lstrip()[:8].split(None, 1)
    if not head or head[0].rsplit("/", 1)[-1] not in _READ_PROGRAMS:
        return None  # cheap exit for the common case
    if _SHELL_META.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if not words:
        return None
    program = words[0].rsplit("/", 1)[-1]
    operands: list[str] = []
    if program in FILE_READERS:
        skip_next = False
        for word in words[1:]:
            if skip_next:
                skip_next = False
                continue
            if word in ("-n", "-c", "--lines", "--bytes"):
                skip_next = True
                continue
            if word.startswith("-"):
                continue
            operands.append(word)
    elif program == "sed" and len(words) >= 4 and words[1] == "-n":
        operands = [w for w in words[3:] if not w.startswith("-")]
    else:
        return None
    return operands[0] if len(operands) == 1 else None


def fingerprint(event: Event) -> str:
    """The loose key of a tool call, memoized on the event."""
    cached = event.cache.get("fingerprint")
    if cached is not None:
        return cached
    args = event.args or {}
    tool = event.tool or "?"
    result = None
    for key in COMMAND_KEYS:
        command = _command_text(args.get(key))
        if command is not None:
            path = shell_file_read(command)
            if path is not None:
                result = f"{tool}:file_read:{path}"
            break
    if result is None:
        primary = {k: args[k] for k in PRIMARY_KEYS if k in args}
        if primary:
            result = f"{tool}:{canonical_args(primary)}"
        else:
            result = f"{tool}:{canonical_args(args)}"
    event.cache["fingerprint"] = result
    return result


def is_acknowledgement(result: Event) -> bool:
    """A result that only says "it worked" (or nothing at all)."""
    if result.is_error or len(result.content) > 400:
        return False
    cached = result.cache.get("ack")
    if cached is None:
        text = squash_ws(result.content)
        cached = result.cache["ack"] = len(text) < 3 or bool(_ACK.match(text))
    return cached


def looks_like_failure(result: Event) -> bool:
    """An error result, or text that reads like one (its head or tail)."""
    if result.is_error:
        return True
    cached = result.cache.get("failure")
    if cached is None:
        text = result.content
        sample = text if len(text) <= 1200 else text[:600] + text[-600:]
        low = sample.lower()
        cached = any(word in low for word in _FAILURE_WORDS) or (
            "exit" in low and _NONZERO_EXIT.search(low) is not None
        )
        result.cache["failure"] = cached
    return cached


def arg_similarity(a: Any, b: Any, cutoff: float = 0.0) -> float:
    """Normalized Levenshtein similarity of two argument values (design note 001):
    strings by edit distance, objects field by field, lists element-wise."""
    from rapidfuzz.distance import Levenshtein

    if isinstance(a, str) and isinstance(b, str):
        if a == b:
            return 1.0
        longest = max(len(a), len(b))
        # Edit distance is at least the length difference: skip hopeless pairs.
        if longest and 1.0 - abs(len(a) - len(b)) / longest < cutoff:
            return 0.0
        return Levenshtein.normalized_similarity(a[:2000], b[:2000], score_cutoff=cutoff or None)
    if isinstance(a, dict) and isinstance(b, dict):
        keys = set(a) | set(b)
        if not keys:
            return 1.0
        matching = sum(1 for k in keys if k in a and k in b and arg_similarity(a[k], b[k], 0.8) >= 0.8)
        return matching / len(keys)
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return 0.0
        if not a:
            return 1.0
        return sum(arg_similarity(x, y) for x, y in zip(a, b)) / len(a)
    return 1.0 if a == b else 0.0
