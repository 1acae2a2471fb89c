"""A live monitor assembled: store, hub and sources, started and stopped together.

``watch`` (headless or TUI), ``demo`` and the tests build one
:class:`LiveMonitor` the same way; :meth:`LiveMonitor.running` is what the
TUI enters on its own loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from monitor.config import Config
from monitor.hub.core import Hub
from monitor.sources.fair import IngestMux

if TYPE_CHECKING:
    from monitor.metrics import MetricsServer
    from monitor.otlp_export import OtlpExporter
    from monitor.sources.files import FileSource
    from monitor.sources.otlp import OtlpReceiver
    from monitor.sources.paths import StartPolicy
    from monitor.sources.sockets import SocketServer
    from monitor.store import Store


def _state_dir() -> Path:
    from monitor.paths import hook_state_dir

    return hook_state_dir()


#: Told where a started monitor listens and records (``None`` once it stops): see ``doctor``.
Announce = Callable[["dict[str, str | None] | None"], None]


class LiveMonitor:
    """Store + hub + file, socket, OTLP and metrics endpoints.

    Build it anywhere; :meth:`start` and :meth:`stop` run on the loop that
    should own the hub (``asyncio.run`` headless, Textual's loop in the TUI).
    """

    def __init__(
        self,
        config: Config,
        *,
        paths: Sequence[str] = (),
        directories: Sequence[str] = (),
        fmt: str | None = None,
        start_policy: StartPolicy | None = None,
        db: str | None = None,
        use_db: bool = True,
        socket_path: str | None = None,
        use_socket: bool = True,
        listen: str | None = None,
        token: str | None = None,
        otlp: str | None = None,
        metrics: str | None = None,
        announce: Announce | None = None,
        otlp_pending: Path | None = None,
        otlp_export: str | None = None,
    ):
        self.config = config
        self.paths = list(paths)
        self.directories = list(directories)
        self.fmt = fmt
        self.start_policy = start_policy
        self.db = db
        self.use_db = use_db
        self.socket_path = socket_path
        self.use_socket = use_socket
        self.listen = listen
        self.token = token
        self.otlp_address = otlp
        #: Where OTLP events accepted but unprocessed at stop wait for the next start.
        self.otlp_pending = otlp_pending if otlp_pending is not None else _state_dir()
        self.metrics_address = metrics
        #: Where detections are sent as OpenTelemetry (``--otlp-export``, else ``[export] otlp_url``).
        self.otlp_export_url = otlp_export or config.export.otlp_url or None
        self.exporter: OtlpExporter | None = None
        self.announce = announce
        self.store: Store | None = None
        self.hub: Hub | None = None
        #: One fair pump for every source's events (files, sockets, OTLP): sources/fair.py.
        self.ingest: IngestMux | None = None
        self.files: FileSource | None = None
        self.sockets: SocketServer | None = None
        self.otlp: OtlpReceiver | None = None
        self.metrics: MetricsServer | None = None
        self.notes: list[str] = []  # for the operator: actions of an interrupted run

    def open_store(self) -> None:
        """Open the database (raises on an unusable one)."""
        if not self.use_db:
            return
        from monitor.store import Store

        store = Store.from_settings(self.config.store, self.db)
        # Nobody chose the default file: a run that recorded nothing removes it.
        store.discard_if_unused = not self.db and not self.config.store.path
        store.start()
        self.store = store
        for action in store.reconciled:
            self.notes.append(
                f"action {action['id']} ({action['kind']} {action['session']}) of an "
                f"interrupted run: {action['outcome']} ({action['detail']})"
            )

    def build_hub(self) -> Hub:
        """The hub, made once (subscribe to it before :meth:`start` to miss nothing)."""
        if self.hub is None:
            self.hub = Hub(self.config, self.store)
        return self.hub

    async def start(self) -> None:
        if self.store is None and self.use_db:
            self.open_store()
        hub = self.build_hub()
        await hub.start()
        self._start_exporter(hub)  # before any source: no detection is missed
        self.ingest = IngestMux(hub)
        self.ingest.start()
        token = self.token or os.environ.get("LOOPWATCH_TOKEN") or None
        if self.paths or self.directories:
            from monitor.sources.files import FileSource, KnownPositions

            # Where the previous watcher on this database stopped: resumed, never stored twice.
            known = KnownPositions(self.store.file_positions() if self.store is not None else ())
            self.files = FileSource(
                self.paths,
                hub,
                fmt=self.fmt,
                start=self.start_policy,
                directories=self.directories,
                known=known,
                ingest=self.ingest,
            )
            await self.files.start()
        if self.otlp_address:
            from monitor.sources.otlp import OtlpReceiver

            self.otlp = OtlpReceiver(
                hub,
                self.otlp_address,
                token=token,
                loopback_needs_token=self.config.sources.otlp_loopback_needs_token,
                ingest=self.ingest,
                pending=self.otlp_pending,
            )
            await self.otlp.start()
            if self.otlp.resumed:
                self.notes.append(
                    f"{self.otlp.resumed:,} OTLP events an earlier run accepted and left in "
                    f"{self.otlp_pending} were read first"
                )
        if self.metrics_address:
            from monitor.metrics import Metrics, MetricsServer

            metrics = Metrics(hub, self.otlp, self.exporter)
            self.metrics = MetricsServer(metrics, self.metrics_address, token=token)
            await self.metrics.start()
        if self.use_socket:
            from monitor.sources.sockets import SocketServer

            self.sockets = SocketServer(
                hub,
                self.config,
                unix_path=self.socket_path,
                listen=self.listen,
                token=self.token,
                ingest=self.ingest,
            )
            await self.sockets.start()
        self._announce_started()

    def _start_exporter(self, hub: Hub) -> None:
        if not self.otlp_export_url:
            return
        from monitor.otlp_export import OtlpExporter

        self.exporter = OtlpExporter(
            hub,
            self.otlp_export_url,
            headers=self.config.export.otlp_headers,
            traces=self._trace_of,
            queue=self.config.export.otlp_queue,
        )
        self.exporter.start()

    def _announce_started(self) -> None:
        if self.announce is None:
            return
        where: dict[str, str | None] = {
            "socket": str(self.sockets.unix_path) if self.sockets is not None else None,
            "otlp": self.otlp.endpoint if self.otlp is not None else None,
            "db": str(self.store.path) if self.store is not None else None,
        }
        if self.otlp_export_url:
            where["otlp_export"] = self.otlp_export_url  # its headers (a token) are not written
        self.announce(where)

    def _trace_of(self, session: str) -> tuple[str, str] | None:
        """The trace a session's OTLP records came with lately (for the exporter)."""
        return self.otlp.adapter.traces.get(session) if self.otlp is not None else None

    async def stop(self) -> None:
        """Stop the sources, process what they queued, flush and close the database."""
        if self.announce is not None:
            self.announce(None)
        if self.metrics is not None:
            await self.metrics.stop()
        if self.otlp is not None:
            await self.otlp.stop()
        if self.sockets is not None:
            await self.sockets.stop()
        if self.files is not None:
            await self.files.stop()
        if self.ingest is not None:
            # What sockets and OTLP sent reaches the hub; what files' lanes hold
            # is read again by the next run, from the position stored before it.
            await self.ingest.close()
        if self.hub is not None:
            await self.hub.stop()
        if self.exporter is not None:
            await self.exporter.stop()  # the hub's last detections, for half a second at most
        if self.store is not None:
            await asyncio.to_thread(self.store.close)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Hub]:
        """Started on entry (yields the hub), stopped on exit: what the TUI enters."""
        await self.start()
        try:
            yield self.build_hub()
        finally:
            await self.stop()

    def describe(self) -> str:
        parts = []
        if self.files is not None:
            parts.append(f"watching {self.files.describe()} ({self.files.start_policy.describe()})")
        if self.sockets is not None:
            where = str(self.sockets.unix_path)
            if self.sockets.tcp_address:
                where += " and tcp {}:{}".format(*self.sockets.tcp_address)
            parts.append(f"agents may connect to {where}")
        if self.otlp is not None:
            parts.append(self.otlp.describe())
        if self.metrics is not None:
            parts.append(f"metrics at {self.metrics.endpoint}")
        if self.exporter is not None:
            parts.append(self.exporter.describe())
        parts.append(f"recording to {self.store.path}" if self.store is not None else "not recording")
        seeded = getattr(self.hub, "seeded", 0)
        if seeded:
            parts.append(f"showing {seeded:,} session(s) recorded before")
        return "; ".join(parts)
