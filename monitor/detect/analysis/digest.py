"""Stable short digests for pattern keys.

A detection's pattern keys the escalation ladder, acknowledgements and false
positives, so it must name the same loop in every process: ``hash()`` is
salted per process (``PYTHONHASHSEED``), a digest is not.
"""

from __future__ import annotations

import hashlib


def digest(text: str) -> str:
    """A short stable digest (16 hex digits) of ``text``."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
