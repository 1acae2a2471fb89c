"""Configuration: presets, the TOML file, and strict validation.

One TOML file holds everything (``--config FILE``, or ``config.toml`` in the
user config dir).  Unknown keys and wrong types are errors that name the key,
e.g. ``detectors.exact_repeat.threshold: expected an integer, got 'three'``.

    preset = "balanced"            # conservative | balanced | aggressive

    [detectors.exact_repeat]
    threshold = 4

    [tools.write_stdin]
    exempt = true
    [tools.web_search]
    threshold = 6

    [escalation]
    ladder = ["warn", "warn", "terminate"]
    cooldown_seconds = 60

    [store]   path = "…/loopwatch.db", retention_days = 30, content_chars = 4000
    [sources] paths = ["~/agents/logs"], socket = "…", from_start = false
    [control] auto_inject = false, auto_kill = false, kill_grace_seconds = 5, guard = false
    [alerts]  level = "warn", desktop = false, webhook = "", command = [], every_seconds = 300
    [ui]      theme = "loopwatch-dark", refresh_hz = 10, keymap = { kill = "ctrl+k" }
    [export]  otlp_url = "http://localhost:4318", otlp_headers = { Authorization = "Bearer …" }

    [prices."claude-sonnet-4-5"]   # dollars per million tokens, over monitor/prices.toml
    input = 3.0
    output = 15.0
    cache_write = 3.75
    cache_read = 0.30
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from monitor.config_bounds import BoundsError, check_number, check_template
from monitor.cost import PriceError, PriceTable, default_prices, parse_prices
from monitor.detect.base import Detector, DetectorSettings, ToolOverride
from monitor.detect.escalation import DEFAULT_NUDGES, PRESET_LADDERS, EscalationSettings
from monitor.events import Level

# Re-exported: the paths live in monitor.paths so that the client and the hook need not import this.
from monitor.paths import default_config_path, default_socket_path, user_config_dir, user_data_dir  # noqa: F401

PRESETS = ("conservative", "balanced", "aggressive")


class ConfigError(ValueError):
    """An invalid configuration; the message names the offending key."""


@dataclass(frozen=True)
class StoreSettings:
    path: str = ""  # empty: <user data dir>/loopwatch.db
    retention_days: float = 0.0  # 0: keep events forever
    content_chars: int = 4000  # bounded copy of each event's content
    batch_size: int = 500
    flush_ms: int = 200
    #: Closing on a full disk: retried this long, then what still waits is given up (counted lost).
    full_disk_close_seconds: float = 5.0  # monitor.store.fullness.CLOSE_SECONDS


@dataclass(frozen=True)
class SourceSettings:
    paths: tuple[str, ...] = ()
    socket: str = ""  # empty: default path in the user runtime dir
    listen: str = ""  # HOST:PORT for TCP (needs a token)
    from_start: bool = False
    idle_timeout_seconds: float = 1800.0
    #: A session waiting for the person (a permission prompt, a question) this
    #: long raises a notice, once per wait; 0: never.
    waiting_notice_seconds: float = 300.0
    #: Live sessions (their detector state in memory): beyond either bound the
    #: least recently active is closed as idle (kept in the store; revived if it speaks).
    max_live_sessions: int = 8000
    max_live_sessions_per_source: int = 1000
    max_line_bytes: int = 1_048_576
    max_connections: int = 256  # each for Unix-socket and for TCP: TCP never takes a local agent's place
    #: TCP before a valid hello: an absolute deadline from accept (not reset by
    #: reads), a cap of its own and at most this many bytes buffered.
    hello_timeout_seconds: float = 10.0
    max_unauthenticated: int = 32
    #: ...of which one address may hold this many (its oldest is closed to make room).
    max_unauthenticated_per_address: int = 8
    preauth_bytes: int = 65536
    #: ``watch --otlp`` on a loopback address needs the token too (any local
    #: user can reach a loopback port); false accepts token-less OTLP there.
    otlp_loopback_needs_token: bool = True


@dataclass(frozen=True)
class ControlSettings:
    auto_inject: bool = False
    auto_kill: bool = False
    kill_grace_seconds: float = 5.0
    #: Deny (through the hook) the calls that continue a loop at ``guard_level``,
    #: for every session; the operator turns it on or off per session too.
    guard: bool = False
    guard_level: Level = Level.CRITICAL


@dataclass(frozen=True)
class AlertSettings:
    """``[alerts]``: telling someone outside the terminal (monitor/alerts.py)."""

    level: Level = Level.WARN
    desktop: bool = False
    webhook: str = ""  # an http(s) URL; empty: none
    command: tuple[str, ...] = ()  # argv, run without a shell, the detection as JSON on stdin
    timeout_seconds: float = 10.0
    retries: int = 3
    #: One alert per (session, detector, pattern) in this many seconds.
    every_seconds: float = 300.0


@dataclass(frozen=True)
class ExportSettings:
    """``[export]``: detections out (monitor/otlp_export.py)."""

    otlp_url: str = ""  # an OTLP/HTTP endpoint; empty: off (``watch --otlp-export URL`` overrides)
    otlp_headers: dict[str, str] = field(default_factory=dict)  # e.g. {Authorization = "Bearer …"}
    otlp_queue: int = 1000  # detections waiting to be sent before the oldest is dropped (counted)


@dataclass(frozen=True)
class UISettings:
    theme: str = "loopwatch-dark"
    refresh_hz: float = 10.0
    keymap: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
    """The whole configuration, with defaults for everything."""

    preset: str = "balanced"
    detectors: dict[str, DetectorSettings] = field(default_factory=dict)
    tool_overrides: dict[str, ToolOverride] = field(default_factory=dict)
    escalation: EscalationSettings = field(default_factory=EscalationSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    sources: SourceSettings = field(default_factory=SourceSettings)
    control: ControlSettings = field(default_factory=ControlSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    ui: UISettings = field(default_factory=UISettings)
    export: ExportSettings = field(default_factory=ExportSettings)
    #: What tokens cost: the shipped table with ``[prices.<model>]`` over it.
    prices: PriceTable = field(default_factory=default_prices)
    path: Path | None = None

    def detector_settings(self, name: str) -> DetectorSettings:
        settings = self.detectors.get(name)
        if settings is None:
            settings = _preset_settings(name, self.preset)
            self.detectors[name] = settings
        return settings

    def with_preset(self, preset: str) -> Config:
        """The same file's settings re-applied on top of another preset."""
        if self.path is not None:
            return load_config(self.path, preset=preset)
        return build_config({}, preset=preset)


def _registry() -> dict[str, type[Detector]]:
    from monitor.detect import REGISTRY

    return REGISTRY


def _preset_settings(name: str, preset: str) -> DetectorSettings:
    cls = _registry()[name]
    overrides = cls.presets.get(preset, {})
    return cls.Settings(**overrides)


def _coerce(key: str, value: Any, default: Any) -> Any:
    """Check ``value`` against the type of ``default``; convert lists to tuples."""
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if isinstance(default, Level):
        try:
            return Level.parse(value)
        except ValueError as exc:
            raise ConfigError(f"{key}: {exc}") from None
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        if value < 0:
            raise ConfigError(f"{key}: must not be negative, got {value!r}")
        _bounded(key, value)
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        if value < 0:
            raise ConfigError(f"{key}: must not be negative, got {value!r}")
        _bounded(key, value)
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    if isinstance(default, tuple):
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        sample = default[0] if default else None
        return tuple(
            _coerce(f"{key}[{i}]", item, sample) if sample is not None else item
            for i, item in enumerate(value)
        )
    if isinstance(default, dict):
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a table, got {value!r}")
        for k, v in value.items():
            if not isinstance(v, str):
                raise ConfigError(f"{key}.{k}: expected a string, got {v!r}")
        return dict(value)
    return value


def _bounded(key: str, value: float) -> None:
    try:
        check_number(key, value)
    except BoundsError as exc:
        raise ConfigError(str(exc)) from None


def _build_dataclass(cls: type, section: str, table: Any, base: Any = None) -> Any:
    """A frozen settings dataclass from a TOML table, strictly validated."""
    if not isinstance(table, dict):
        raise ConfigError(f"{section}: expected a table, got {table!r}")
    base = base if base is not None else cls()
    known = {f.name: f for f in dataclasses.fields(cls)}
    changes = {}
    for key, value in table.items():
        if key not in known:
            choices = ", ".join(sorted(known))
            raise ConfigError(f"{section}.{key}: unknown key (expected one of: {choices})")
        changes[key] = _coerce(f"{section}.{key}", value, getattr(base, key))
    return dataclasses.replace(base, **changes)


#: The top-level keys of a config file.
SECTIONS = frozenset(
    {
        "preset",
        "detectors",
        "tools",
        "escalation",
        "store",
        "sources",
        "control",
        "alerts",
        "ui",
        "prices",
        "export",
    }
)


def build_config(data: dict[str, Any], preset: str | None = None, path: Path | None = None) -> Config:
    """A :class:`Config` from parsed TOML data (``{}`` for defaults)."""
    registry = _registry()
    for key in data:
        if key not in SECTIONS:
            raise ConfigError(f"{key}: unknown key (expected one of: {', '.join(sorted(SECTIONS))})")
    chosen = preset or data.get("preset", "balanced")
    if not isinstance(chosen, str) or chosen not in PRESETS:
        raise ConfigError(f"preset: expected one of {', '.join(PRESETS)}, got {chosen!r}")

    config = Config(preset=chosen, path=path)
    for name in registry:
        config.detectors[name] = _preset_settings(name, chosen)
    detectors = data.get("detectors", {})
    if not isinstance(detectors, dict):
        raise ConfigError(f"detectors: expected a table, got {detectors!r}")
    for name, table in detectors.items():
        if name not in registry:
            raise ConfigError(
                f"detectors.{name}: unknown detector (expected one of: {', '.join(sorted(registry))})"
            )
        cls = registry[name]
        config.detectors[name] = _build_dataclass(
            cls.Settings, f"detectors.{name}", table, config.detectors[name]
        )

    tools = data.get("tools", {})
    if not isinstance(tools, dict):
        raise ConfigError(f"tools: expected a table, got {tools!r}")
    for tool, table in tools.items():
        override = _build_dataclass(ToolOverride, f"tools.{tool}", table, ToolOverride(threshold=0))
        if override.threshold == 0:
            override = dataclasses.replace(override, threshold=None)
        config.tool_overrides[tool] = override

    config.escalation = _escalation(data, chosen)

    config.store = _build_dataclass(StoreSettings, "store", data.get("store", {}))
    config.sources = _build_dataclass(SourceSettings, "sources", data.get("sources", {}))
    config.export = _build_dataclass(ExportSettings, "export", data.get("export", {}))
    config.control = _control(data.get("control", {}))
    config.alerts = _alerts(data.get("alerts", {}))
    config.ui = _build_dataclass(UISettings, "ui", data.get("ui", {}))
    if "prices" in data:
        try:
            config.prices = default_prices().with_overrides(parse_prices("prices", data["prices"]))
        except PriceError as exc:
            raise ConfigError(str(exc)) from None
    return config


def _control(table: Any) -> ControlSettings:
    control = _build_dataclass(ControlSettings, "control", table)
    if control.guard_level < Level.WARN:
        raise ConfigError("control.guard_level: expected warn, critical or terminate")
    return control


def _alerts(table: Any) -> AlertSettings:
    """``[alerts]``, with the checks a type cannot express (a URL, an argv of strings)."""
    alerts = _build_dataclass(AlertSettings, "alerts", table)
    if alerts.level < Level.NOTICE:
        raise ConfigError("alerts.level: expected notice, warn, critical or terminate")
    if alerts.webhook and not alerts.webhook.startswith(("http://", "https://")):
        raise ConfigError(f"alerts.webhook: expected an http:// or https:// URL, got {alerts.webhook!r}")
    for i, part in enumerate(alerts.command):
        if not isinstance(part, str) or not part:
            raise ConfigError(f"alerts.command[{i}]: expected a non-empty string, got {part!r}")
    return alerts


def _escalation(data: dict[str, Any], preset: str) -> EscalationSettings:
    """``[escalation]`` on top of the preset's ladder, its nudges merged into the defaults."""
    escalation = EscalationSettings(ladder=PRESET_LADDERS[preset])
    table = dict(data.get("escalation", {}))
    nudges = table.pop("nudges", None)
    escalation = _build_dataclass(
        EscalationSettings, "escalation", {k: v for k, v in table.items()}, escalation
    )
    if not escalation.ladder:
        raise ConfigError("escalation.ladder: must name at least one level")
    if nudges is not None:
        if not isinstance(nudges, dict):
            raise ConfigError(f"escalation.nudges: expected a table, got {nudges!r}")
        merged = dict(DEFAULT_NUDGES)
        for level, text in nudges.items():
            if level not in DEFAULT_NUDGES:
                raise ConfigError(
                    f"escalation.nudges.{level}: unknown level (expected one of: {', '.join(DEFAULT_NUDGES)})"
                )
            if not isinstance(text, str):
                raise ConfigError(f"escalation.nudges.{level}: expected a string, got {text!r}")
            try:
                check_template(f"escalation.nudges.{level}", text)
            except BoundsError as exc:
                raise ConfigError(str(exc)) from None
            merged[level] = text
        escalation = dataclasses.replace(escalation, nudges=merged)
    return escalation


def load_config(path: str | Path | None = None, preset: str | None = None) -> Config:
    """Load ``path`` (or the default file if it exists) on top of ``preset``.

    Raises :class:`ConfigError` for an unreadable file, bad TOML or bad keys."""
    explicit = path is not None
    file = Path(path) if path is not None else default_config_path()
    if not file.exists():
        if explicit:
            raise ConfigError(f"{file}: no such config file")
        return build_config({}, preset=preset)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read config: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{file}: invalid TOML: nested too deeply") from None
    try:
        return build_config(data, preset=preset, path=file)
    except ConfigError as exc:
        raise ConfigError(f"{file}: {exc}") from None
