"""Checks of ``[ui] keymap``: known actions, real key names, no key taken twice on one screen.

A keymap typo must be an error that names the setting, not a footer showing ``^kk Kill`` or an
action that silently stops answering because another binding now has its key.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping

from textual.binding import Binding
from textual.keys import REPLACED_KEYS, Keys

from monitor.config import ConfigError

MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
#: Named keys Textual sends (escape, f1 … f24, pageup, …), without the combined ones.
NAMED_KEYS = frozenset(key.value for key in Keys if "+" not in key.value and not key.value.startswith("<"))


def key_problem(key: str) -> str | None:
    """Why ``key`` (one key such as ``ctrl+k``, ``I``, ``question_mark``) is not one Textual can send."""
    *modifiers, name = key.split("+")
    unknown = [m for m in modifiers if m not in MODIFIERS]
    if unknown or not name:
        return f"{key!r}: {', '.join(unknown) or 'nothing'} is not a modifier (ctrl, shift, alt, meta, super)"
    if (len(name) == 1 and name.isprintable()) or name in NAMED_KEYS or name in REPLACED_KEYS:
        return None
    try:  # Textual names printable characters by their Unicode name: question_mark, full_stop
        unicodedata.lookup(name.replace("_", " "))
    except KeyError:
        return f"{key!r}: {name!r} is not a key name (a character, or escape, enter, tab, space, up, f1 …)"
    return None


def _keys(spec: str) -> list[str]:
    return [key.strip() for key in spec.split(",") if key.strip()]


def check_keymap(keymap: Mapping[str, str], screens: Mapping[str, Iterable[Binding]]) -> None:
    """Raise a :class:`ConfigError` naming ``ui.keymap.<id>`` for an unknown action, a key that
    does not exist, or a key another binding of the same screen already answers to.

    ``screens`` maps a screen's name to its bindings; the app's own bindings are listed as ``app``
    and apply on every screen."""
    known = {b.id for bindings in screens.values() for b in bindings if b.id}
    for binding_id, spec in keymap.items():
        if binding_id not in known:
            raise ConfigError(
                f"ui.keymap.{binding_id}: unknown action (expected one of: {', '.join(sorted(known))})"
            )
        if not spec.strip():
            raise ConfigError(f'ui.keymap.{binding_id}: expected a key such as "ctrl+k"')
        for key in _keys(spec):
            problem = key_problem(key)
            if problem:
                raise ConfigError(f"ui.keymap.{binding_id}: {problem}")
    app = list(screens.get("app", ()))
    for name, bindings in screens.items():
        _check_clashes(keymap, name, list(bindings) if name == "app" else [*bindings, *app])


def _check_clashes(keymap: Mapping[str, str], screen: str, bindings: list[Binding]) -> None:
    """Two actions of one screen on one key, where the user's keymap put one of them there."""
    owner: dict[str, str] = {}
    for binding in bindings:
        if not binding.id:
            continue
        spec = keymap.get(binding.id, binding.key)
        for key in _keys(spec):
            other = owner.setdefault(key, binding.id)
            if other != binding.id and (binding.id in keymap or other in keymap):
                mine, theirs = (binding.id, other) if binding.id in keymap else (other, binding.id)
                raise ConfigError(
                    f"ui.keymap.{mine}: {key!r} is already {theirs}'s key on the {screen} screen; "
                    f"choose another key (or move {theirs} too)"
                )
