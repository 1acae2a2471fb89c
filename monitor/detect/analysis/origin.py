"""Who made a call: the agent, or the harness around it on its own.

Some harnesses run commands between the model's steps that no reply asked
for: a memory hook checking its directory after every turn, a set-up step.
An adapter that can tell marks such a call (and its result) with
``meta["harness"] = True`` (the Vorflux adapter does; a native record may
carry ``"harness": true``).  The engine shows and records it, but no detector
sees it: the harness repeating its hook is not the model going round in
circles, and its failures are not the agent's.
"""

from __future__ import annotations

from monitor.events import Event


def by_harness(event: Event) -> bool:
    """True for a tool call, or the result of one, that the harness made by itself."""
    if event.meta and event.meta.get("harness") is True:
        return True
    call = event.call
    return call is not None and bool(call.meta) and call.meta.get("harness") is True
