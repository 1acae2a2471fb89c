"""Live sessions are bounded, per source and in all (issue 32, item 7).

Before, 50,000 new sessions in 5 OTLP requests took the monitor from 40 to
998 MB (the idle timeout is 30 minutes).  Now beyond ``[sources]
max_live_sessions_per_source`` / ``max_live_sessions`` the least recently
active live session is closed as idle: its detector state freed, its row
kept in the store, revived if it speaks again.  Real OTLP requests, a real
hub and a real SQLite store; the bounds are set small so the test is quick.
"""

from __future__ import annotations

import json

from monitor.config import build_config
from monitor.hub import Hub
from monitor.sources.otlp import OtlpReceiver
from monitor.store import Store
from tests.test_otlp import post


def _logs(service: str, sessions: range) -> bytes:
    def attr(key, value):
        return {"key": key, "value": {"stringValue": str(value)}}

    records = [
        {
            "timeUnixNano": str(1_796_000_000_000_000_000 + n),
            "attributes": [
                attr("event.name", "tool_result"),
                attr("session.id", f"s{n:05d}"),
                attr("tool_name", "Bash"),
                attr("success", "true"),
                attr("tool_use_id", f"t{n}"),
            ],
        }
        for n in sessions
    ]
    resource = {"attributes": [attr("service.name", service), attr("host.name", "h")]}
    return json.dumps(
        {"resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]}
    ).encode()


async def test_live_sessions_are_bounded_per_source_and_in_all_and_kept_in_the_store(tmp_path):
    config = build_config({"sources": {"max_live_sessions": 50, "max_live_sessions_per_source": 20}})
    store = Store(tmp_path / "lw.db")
    store.start()
    hub = Hub(config, store)
    await hub.start()
    otlp = OtlpReceiver(hub, ("127.0.0.1", 0), loopback_needs_token=False)
    await otlp.start()
    try:
        assert (await post(otlp, "/v1/logs", _logs("agent-a", range(100))))[0] == 200
        await otlp.flushed()
        await hub.join()
        live = [s for s in hub.sessions() if s.status == "live"]
        assert len(live) == 20  # one source's share
        assert {s.id for s in live} == {f"agent-a@h/s{n:05d}" for n in range(80, 100)}  # the most recent
        assert len(hub.engine.sessions) == 20  # detector state freed for the others
        for k, service in enumerate(("agent-b", "agent-c", "agent-d")):
            await post(otlp, "/v1/logs", _logs(service, range(1000 * (k + 1), 1000 * (k + 1) + 20)))
        await otlp.flushed()
        await hub.join()
        assert sum(1 for s in hub.sessions() if s.status == "live") == 50  # in all
        assert len(hub.engine.sessions) == 50
        # An evicted session that speaks again is revived, another one closed for it.
        await post(otlp, "/v1/logs", _logs("agent-a", range(0, 1)).replace(b'"t0"', b'"t0-again"'))
        await otlp.flushed()
        await hub.join()
        assert hub.session("agent-a@h/s00000").status == "live"
        assert sum(1 for s in hub.sessions() if s.status == "live") == 50
    finally:
        await otlp.stop()
        await hub.stop()
        store.close()
    stored = Store(tmp_path / "lw.db")
    stored.start()
    try:
        assert len(stored.list_sessions(limit=1000)) == 160  # every session kept in the store
    finally:
        stored.close()
