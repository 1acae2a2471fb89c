"""The live core: sources → engine → escalation → store → subscribers.

One :class:`Hub` runs on one asyncio loop (the headless watcher's, or
Textual's); :class:`~monitor.hub.live.LiveMonitor` assembles it with a store
and its sources.  The package, by responsibility:

* :mod:`~monitor.hub.core` -- the :class:`Hub`: queue, worker, reads, periodic work;
* :mod:`~monitor.hub.publishing` -- what subscribers are told, session snapshots coalesced;
* :mod:`~monitor.hub.intake` -- the bounded input queue (back-pressure);
* :mod:`~monitor.hub.state` -- what the hub keeps per session (:class:`~monitor.hub.state.HubSession`);
* :mod:`~monitor.hub.sessions` -- session lifecycle (new, revived, idle, ended, forgotten);
* :mod:`~monitor.hub.snapshots` -- each session's :class:`~monitor.updates.SessionInfo` and window;
* :mod:`~monitor.hub.actions` -- operator and automatic actions (committed before carried out);
* :mod:`~monitor.hub.recording` -- what is written to the store;
* :mod:`~monitor.hub.replay` -- a stored session replayed through the engine;
* :mod:`~monitor.hub.live` -- store, hub and sources started and stopped together.

What subscribers receive is in :mod:`monitor.updates`.  A session is ``live``
only while a source delivers it; when the hub stops, every session not ended
is ``stopped`` (its watcher stopped), in the store too.  After a delivered
inject a session is *nudged* until the agent has made ``RECOVERY_STEPS`` calls
or replies in a row without a detection at warn or above.
"""

from monitor.hub.core import Hub

__all__ = ["Hub"]
