"""``watch --metrics [HOST:]PORT``: Prometheus text metrics (off by default).

``GET /metrics`` answers in the Prometheus text exposition format (0.0.4):

* ``loopwatch_sessions{status,level}`` -- sessions the monitor holds, by
  status (live / idle / ended) and escalation level;
* ``loopwatch_sessions_waiting{why}`` -- sessions waiting for the person
  (permission, question, elicitation, idle, input), not ended;
* ``loopwatch_episodes_total{change}`` -- loop episodes opened, escalated
  and closed (one loop is one episode, however many repeats:
  docs/episodes.md), and ``loopwatch_episodes_open`` those open now;
* ``loopwatch_detections_total{detector,level}`` -- detections raised (a
  loop's every repeat);
* ``loopwatch_actions_total{kind,outcome}`` -- operator and automatic actions;
* ``loopwatch_events_total``, and what was not counted as an event:
  ``loopwatch_dropped_events_total{reason}`` with reason ``bad_input`` (records
  skipped as unreadable, with a problem reported), ``duplicate`` (a call seen
  twice, over two channels), ``otlp_rejected`` (agent records in an OTLP
  export that could not be read), ``otlp_throttled`` (OTLP requests
  answered 503 to be retried) and ``otlp_resent`` (records of a batch an
  exporter sent again, taken the first time only);
* ``loopwatch_otlp_export_total{outcome}`` (with ``--otlp-export``) --
  detections sent (``sent``), dropped (``lost``: queue full, refused, not
  accepted after retries) and the retries made (``retry``).

A subscriber of the hub counts detections and actions; the rest is read from
the hub when scraped.  Like ``--listen`` and ``--otlp``, a bind beyond
loopback needs the token (``Authorization: Bearer <token>``).
"""

from __future__ import annotations

import asyncio
import hmac
from collections import Counter
from typing import Any

from monitor.events import Level
from monitor.updates import ActionFinished, DetectionRaised, EpisodeChanged

DEFAULT_ADDRESS = ("127.0.0.1", 9464)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Counts what the hub publishes and renders the exposition text."""

    def __init__(self, hub: Any, otlp: Any = None, exporter: Any = None):
        self.hub = hub
        self.otlp = otlp
        self.exporter = exporter
        self.detections: Counter[tuple[str, str]] = Counter()
        self.actions: Counter[tuple[str, str]] = Counter()
        self.episodes: Counter[str] = Counter({"opened": 0, "escalated": 0, "closed": 0})
        self.unsubscribe = hub.subscribe(self._on_update, (DetectionRaised, EpisodeChanged, ActionFinished))

    def _on_update(self, update: object) -> None:
        if isinstance(update, DetectionRaised):
            detection = update.detection
            self.detections[(detection.detector, detection.level.label)] += 1
        elif isinstance(update, EpisodeChanged):
            if update.change.kind != "updated":
                self.episodes[update.change.kind] += 1
        elif isinstance(update, ActionFinished):
            self.actions[(update.action.kind, update.action.outcome)] += 1

    def render(self) -> str:
        hub = self.hub
        lines = [
            "# HELP loopwatch_sessions Sessions held by the monitor, by status and level.",
            "# TYPE loopwatch_sessions gauge",
        ]
        sessions: Counter[tuple[str, str]] = Counter(
            (info.status, info.level.label) for info in hub.sessions()
        )
        for status in ("live", "idle", "ended"):
            for level in Level:
                lines.append(
                    f'loopwatch_sessions{{status="{status}",level="{level.label}"}} '
                    f"{sessions.get((status, level.label), 0)}"
                )
        lines += [
            "# HELP loopwatch_episodes_total Loop episodes opened, escalated and closed.",
            "# TYPE loopwatch_episodes_total counter",
            *(f'loopwatch_episodes_total{{change="{k}"}} {n}' for k, n in self.episodes.items()),
            "# HELP loopwatch_episodes_open Loop episodes open now.",
            "# TYPE loopwatch_episodes_open gauge",
            f"loopwatch_episodes_open {self.episodes['opened'] - self.episodes['closed']}",
        ]
        lines += _waiting_lines(hub)
        lines += [
            "# HELP loopwatch_detections_total Detections raised, by detector and level.",
            "# TYPE loopwatch_detections_total counter",
        ]
        for (detector, level_name), count in sorted(self.detections.items()):
            lines.append(
                f'loopwatch_detections_total{{detector="{_label(detector)}",level="{level_name}"}} {count}'
            )
        lines += [
            "# HELP loopwatch_actions_total Actions carried out, by kind and outcome.",
            "# TYPE loopwatch_actions_total counter",
        ]
        for (kind, outcome), count in sorted(self.actions.items()):
            lines.append(
                f'loopwatch_actions_total{{kind="{_label(kind)}",outcome="{_label(outcome)}"}} {count}'
            )
        lines += [
            "# HELP loopwatch_events_total Events processed.",
            "# TYPE loopwatch_events_total counter",
            f"loopwatch_events_total {hub.events_total}",
            "# HELP loopwatch_dropped_events_total Input not counted as events, by reason.",
            "# TYPE loopwatch_dropped_events_total counter",
        ]
        dropped = {"bad_input": hub.problems_total, "duplicate": hub.engine.counts().duplicates}
        if self.otlp is not None:
            dropped["otlp_rejected"] = self.otlp.rejected
            dropped["otlp_throttled"] = self.otlp.throttled
            dropped["otlp_resent"] = self.otlp.duplicates
        for reason, count in dropped.items():
            lines.append(f'loopwatch_dropped_events_total{{reason="{reason}"}} {count}')
        return "\n".join(lines + self._exported()) + "\n"

    def _exported(self) -> list[str]:
        if self.exporter is None:
            return []
        lines = [
            "# HELP loopwatch_otlp_export_total Detections exported as OpenTelemetry, by outcome.",
            "# TYPE loopwatch_otlp_export_total counter",
        ]
        for outcome, count in (
            ("sent", self.exporter.sent),
            ("lost", self.exporter.lost),
            ("retry", self.exporter.retries),
        ):
            lines.append(f'loopwatch_otlp_export_total{{outcome="{outcome}"}} {count}')
        return lines


class MetricsServer:
    """A minimal HTTP server answering ``GET /metrics``."""

    def __init__(
        self, metrics: Metrics, address: str | tuple[str, int] | None = None, *, token: str | None = None
    ):
        from monitor.sources.otlp import OtlpError, is_loopback, parse_address

        self.metrics = metrics
        if isinstance(address, tuple):
            self.host, self.port = address
        elif address:
            self.host, self.port = parse_address(address)
        else:
            self.host, self.port = DEFAULT_ADDRESS
        self.token = token
        self.server: asyncio.base_events.Server | None = None
        if not is_loopback(self.host) and not token:
            raise OtlpError(f"--metrics {self.host}:{self.port} is not a loopback address: it needs a token")

    @property
    def endpoint(self) -> str:
        host, port = (
            self.server.sockets[0].getsockname()[:2]
            if self.server and self.server.sockets
            else (self.host, self.port)
        )
        return f"http://{host}:{port}/metrics"

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, self.host, self.port)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        self.metrics.unsubscribe()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = (await reader.readline()).decode("latin-1").split()
            headers = {}
            for _ in range(100):
                raw = await reader.readline()
                if raw in (b"\r\n", b"\n", b""):
                    break
                name, _, value = raw.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            if len(request) < 2 or request[0] != "GET":
                status, body = "405 Method Not Allowed", b"GET /metrics\n"
            elif request[1].split("?")[0] != "/metrics":
                status, body = "404 Not Found", b"GET /metrics\n"
            elif self.token is not None and not hmac.compare_digest(
                headers.get("authorization", "").encode(), f"Bearer {self.token}".encode()
            ):
                status, body = "401 Unauthorized", b"missing or invalid token\n"
            else:
                status, body = "200 OK", self.metrics.render().encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()


__all__ = ["Metrics", "MetricsServer"]


def _waiting_lines(hub: Any) -> list[str]:
    """``loopwatch_sessions_waiting{why}``: sessions waiting for the person, by why."""
    waiting = Counter(info.waiting_why for info in hub.sessions() if info.waiting)
    return [
        "# HELP loopwatch_sessions_waiting Sessions waiting for the person, by why.",
        "# TYPE loopwatch_sessions_waiting gauge",
        *(
            f'loopwatch_sessions_waiting{{why="{why}"}} {waiting.get(why, 0)}'
            for why in ("permission", "question", "elicitation", "idle", "input")
        ),
    ]
