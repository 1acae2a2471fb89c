"""What a loop costs: tokens and dollars from the usage a log reports.

Provides the price table (:class:`PriceTable`, read from the ``prices.toml``
shipped in the package, overridable from ``[prices.<model>]`` in the config),
the tokens of one usage event (:func:`usage_parts`), the money as a value
(:class:`Spend`) and the accounting itself (:class:`LoopCosts`), which the
engine feeds: per session, what its usage has cost, and per *loop episode* --
from when the session's escalation leaves watching (notice or above) until it
returns to watching -- what has been spent since it began.  Every detection
carries its episode's cost so far (``Detection.cost``); per day, what loop
episodes have cost (the dashboard's header).

Measured, never projected: only usage the log reported counts, priced at the
model's rates (or at the cost the log itself reported).  A model the table
does not know is counted in tokens and shown "unpriced".  No Textual here.
"""

from __future__ import annotations

import re
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from monitor.events import Event, Level

PRICES_FILE = Path(__file__).with_name("prices.toml")
PRICE_KEYS = ("input", "output", "cache_write", "cache_read")
#: Sessions whose accounts are kept (the least recently used go first).
MAX_SESSIONS = 4096
#: Days of loop totals kept (the header shows today's).
MAX_DAYS = 8
#: A dated snapshot of a model: ``-20250929``, ``-2025-08-07``, ``@20250929``.
_SNAPSHOT = re.compile(r"[-@]\d{4}-?\d{2}-?\d{2}$")


class PriceError(ValueError):
    """A price table that cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens of each kind."""

    input: float
    output: float
    cache_write: float
    cache_read: float

    def dollars(self, plain: int, output: int, cache_write: int, cache_read: int) -> float:
        return (
            plain * self.input
            + output * self.output
            + cache_write * self.cache_write
            + cache_read * self.cache_read
        ) / 1e6


class PriceTable:
    """Prices by model name (lower case), with the table's date and source."""

    def __init__(self, models: Mapping[str, Price] | None = None, *, date: str = "", source: str = ""):
        self.models = {name.lower(): price for name, price in (models or {}).items()}
        self.date = date
        self.source = source
        self._memo: dict[str, Price | None] = {}

    def price(self, model: str | None) -> Price | None:
        """The price of ``model``: its own entry, or that of the name it is a
        dated snapshot of or a router's alias for; None when unknown."""
        if not model:
            return None
        memo = self._memo
        if model in memo:
            return memo[model]
        name = model.strip().lower()
        price = self.models.get(name)
        if price is None and "/" in name:
            name = name.rsplit("/", 1)[1]  # "google/gemini-3-pro-preview"
            price = self.models.get(name)
        if price is None:
            base = _SNAPSHOT.sub("", name)
            price = self.models.get(base) if base != name else None
        if len(memo) < 256:
            memo[model] = price
        return price

    def with_overrides(self, overrides: Mapping[str, Price]) -> PriceTable:
        merged = dict(self.models)
        merged.update({name.lower(): price for name, price in overrides.items()})
        return PriceTable(merged, date=self.date, source=self.source)


def parse_price(key: str, table: Any) -> Price:
    """One model's prices from a TOML table, strictly: all four keys, numbers, not negative."""
    if not isinstance(table, dict):
        raise PriceError(f"{key}: expected a table of {', '.join(PRICE_KEYS)}, got {table!r}")
    for name in table:
        if name not in PRICE_KEYS:
            raise PriceError(f"{key}.{name}: unknown key (expected one of: {', '.join(PRICE_KEYS)})")
    values = []
    for name in PRICE_KEYS:
        if name not in table:
            raise PriceError(f"{key}.{name}: missing (a price needs {', '.join(PRICE_KEYS)})")
        value = table[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PriceError(f"{key}.{name}: expected a number (dollars per million tokens), got {value!r}")
        if value < 0 or value != value or value == float("inf"):
            raise PriceError(f"{key}.{name}: must be a finite number not below 0, got {value!r}")
        values.append(float(value))
    return Price(*values)


def parse_prices(section: str, table: Any) -> dict[str, Price]:
    """``{model: Price}`` from a table of model tables (``[prices.<model>]``)."""
    if not isinstance(table, dict):
        raise PriceError(f"{section}: expected a table of models, got {table!r}")
    return {model: parse_price(f"{section}.{model}", prices) for model, prices in table.items()}


def load_price_table(path: Path = PRICES_FILE) -> PriceTable:
    """The price table file (``models``, ``date``, ``source``)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PriceError(f"{path}: cannot read the price table: {exc}") from None
    for key in data:
        if key not in ("date", "source", "models"):
            raise PriceError(f"{path}: {key}: unknown key (expected date, source, models)")
    try:
        models = parse_prices("models", data.get("models", {}))
    except PriceError as exc:
        raise PriceError(f"{path}: {exc}") from None
    return PriceTable(models, date=str(data.get("date", "")), source=str(data.get("source", "")))


_DEFAULT: PriceTable | None = None


def default_prices() -> PriceTable:
    """The shipped table, read once."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = load_price_table()
    return _DEFAULT


# -- what one usage event spent -------------------------------------------------------------


def _count(value: Any) -> int:
    return value if value.__class__ is int and value > 0 else 0


def usage_parts(event: Event) -> tuple[int, int, int, int]:
    """``(plain input, output, cache write, cache read)`` tokens of a usage event.

    Adapters report ``input_tokens`` with the cached part included (Claude
    Code's three input counts are summed by its decoder; OpenAI counts cached
    input inside the input) and the cached part in ``meta``:
    ``cache_creation_input_tokens`` / ``cache_read_input_tokens`` (Claude,
    native, OTLP) or ``cached_input_tokens`` (Codex)."""
    meta = event.meta
    read = _count(meta.get("cache_read_input_tokens")) or _count(meta.get("cached_input_tokens"))
    write = _count(meta.get("cache_creation_input_tokens"))
    total_in = _count(event.input_tokens)
    # Fewer input tokens than cached ones: the log counted its input apart
    # from the cache (the Anthropic API's way), so all of it is plain input.
    plain = total_in - read - write if total_in >= read + write else total_in
    return plain, _count(event.output_tokens), write, read


@dataclass(frozen=True, slots=True)
class Spend:
    """Tokens and dollars.  ``unpriced`` counts the tokens of usage with no
    price (an unknown model, no cost reported): they are in ``tokens`` but
    not in ``usd``."""

    tokens: int = 0
    usd: float = 0.0
    unpriced: int = 0

    def __add__(self, other: Spend) -> Spend:
        return Spend(self.tokens + other.tokens, self.usd + other.usd, self.unpriced + other.unpriced)

    def __bool__(self) -> bool:
        return bool(self.tokens or self.usd)

    def to_dict(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "usd": round(self.usd, 6), "unpriced_tokens": self.unpriced}

    @classmethod
    def from_dict(cls, data: Any) -> Spend | None:
        """The value :meth:`to_dict` wrote (None for anything else)."""
        if not isinstance(data, dict):
            return None
        tokens, usd, unpriced = data.get("tokens"), data.get("usd"), data.get("unpriced_tokens", 0)
        if not isinstance(tokens, int) or not isinstance(usd, (int, float)) or not isinstance(unpriced, int):
            return None
        return cls(tokens, float(usd), unpriced)

    def dollars(self) -> str:
        """``$0.42``, ``unpriced`` when nothing of it had a price."""
        if self.unpriced and self.unpriced >= self.tokens and not self.usd:
            return "unpriced"
        return money(self.usd)

    def short(self) -> str:
        """``$0.42``, or the tokens when none of them had a price."""
        dollars = self.dollars()
        return f"{tokens_text(self.tokens)} unpriced" if dollars == "unpriced" else dollars

    def text(self) -> str:
        """``12.3k tok · $0.42`` (``… (+1.2k tok unpriced)`` when part had no price)."""
        out = f"{tokens_text(self.tokens)} · {self.dollars()}"
        if self.unpriced and (self.usd or self.unpriced < self.tokens):
            out += f" (+{tokens_text(self.unpriced)} unpriced)"
        return out


def money(usd: float) -> str:
    if usd == 0:
        return "$0.00"
    if usd < 0.01:
        return "<$0.01"
    return f"${usd:,.2f}"


def tokens_text(tokens: int) -> str:
    if tokens >= 1_000_000:
        return f"{tokens / 1e6:.1f}M tok"
    if tokens >= 1000:
        return f"{tokens / 1e3:.1f}k tok"
    return f"{tokens} tok"


def stored_loop_cost(row: Mapping[str, Any]) -> Spend | None:
    """What a stored session's loop episodes cost (its ``loop_*`` columns);
    None when nothing was spent in a loop."""
    tokens, usd = row.get("loop_tokens") or 0, row.get("loop_usd") or 0.0
    if not tokens and not usd:
        return None
    return Spend(int(tokens), float(usd), int(row.get("loop_unpriced_tokens") or 0))


def spend_text(data: Any) -> str:
    """A stored or exported cost (``Spend.to_dict()``) as text; "" when absent."""
    spend = data if isinstance(data, Spend) else Spend.from_dict(data)
    return spend.text() if spend is not None else ""


# -- the accounts ----------------------------------------------------------------------------


class SessionCost:
    """One session's running totals, its open episode and its loop total.

    Totals only grow, so an episode's cost so far is the totals now minus
    the totals when it began: O(1) per event, nothing kept per event."""

    __slots__ = (
        "model",
        "tokens",
        "usd",
        "unpriced",
        "reported",
        "episode",
        "since",
        "since_seq",
        "base",
        "loop_tokens",
        "loop_usd",
        "loop_unpriced",
    )

    def __init__(self) -> None:
        self.model: str | None = None
        self.tokens = 0
        self.usd = 0.0
        self.unpriced = 0
        self.reported = False  # the log reported usage for this session
        self.episode = 0  # the escalation episode open (0: none)
        self.since = 0.0  # event time it began
        self.since_seq = 0  # and the position of that event in the session
        self.base: tuple[int, float, int] = (0, 0.0, 0)  # the totals then
        self.loop_tokens = 0
        self.loop_usd = 0.0
        self.loop_unpriced = 0

    def so_far(self) -> Spend:
        tokens, usd, unpriced = self.base
        return Spend(self.tokens - tokens, max(0.0, self.usd - usd), self.unpriced - unpriced)

    def loops(self) -> Spend:
        return Spend(self.loop_tokens, self.loop_usd, self.loop_unpriced)


class LoopCosts:
    """Per session, what its usage cost and what its loop episodes cost;
    per day (local, by event time), what loop episodes cost."""

    def __init__(self, prices: PriceTable | None = None):
        self.prices = prices if prices is not None else default_prices()
        self.sessions: dict[str, SessionCost] = {}
        self.days: dict[str, list] = {}  # "YYYY-MM-DD" -> [tokens, usd, unpriced]

    def _account(self, session: str) -> SessionCost:
        sessions = self.sessions
        account = sessions.pop(session, None)  # re-inserted: the most recently used last
        if account is None:
            account = SessionCost()
            if len(sessions) >= MAX_SESSIONS:
                del sessions[next(iter(sessions))]
        sessions[session] = account
        return account

    @staticmethod
    def _sync(account: SessionCost, escalation: Any) -> None:
        """Close the open episode if the session went back to watching (an
        acknowledgement, a recovery, a false positive) or began another."""
        if account.episode and (
            escalation is None or escalation.level is Level.NONE or escalation.episode != account.episode
        ):
            account.episode = 0

    def start(self, event: Event) -> None:
        """A session start: the model it names (native ``meta.model``)."""
        model = event.meta.get("model") if event.meta else None
        if isinstance(model, str) and model:
            self._account(event.session).model = model

    def usage(self, event: Event, escalation: Any) -> None:
        """Count one usage event (``escalation``: the session's state, or None)."""
        account = self._account(event.session)
        self._sync(account, escalation)
        model = event.meta.get("model")
        if model.__class__ is str and model:
            account.model = model
        plain, output, write, read = usage_parts(event)
        tokens = plain + output + write + read
        cost = event.cost_usd
        unpriced = 0
        if cost.__class__ in (int, float) and cost >= 0 and cost != float("inf"):
            usd = float(cost)  # what the agent itself reported it cost
        else:
            price = self.prices.price(account.model)
            if price is None:
                usd, unpriced = 0.0, tokens
            else:
                usd = price.dollars(plain, output, write, read)
        account.reported = True
        account.tokens += tokens
        account.usd += usd
        account.unpriced += unpriced
        if not account.episode:
            if "loop" in event.meta:
                del event.meta["loop"]  # a stored event re-scanned: this run's word counts
            return
        # Marked on the event: the store sums these into the session's row.
        event.meta["loop"] = {"tokens": tokens, "usd": usd, "unpriced_tokens": unpriced}
        account.loop_tokens += tokens
        account.loop_usd += usd
        account.loop_unpriced += unpriced
        day = time.strftime("%Y-%m-%d", time.localtime(event.ts))
        totals = self.days.get(day)
        if totals is None:
            totals = self.days[day] = [0, 0.0, 0]
            while len(self.days) > MAX_DAYS:
                del self.days[min(self.days)]
        totals[0] += tokens
        totals[1] += usd
        totals[2] += unpriced

    def detected(self, session: str, detections: list, escalation: Any, ts: float, seq: int = 0) -> None:
        """After the policy applied ``detections``: open the episode if the
        session just left watching, and give each its cost so far."""
        account = self._account(session)
        self._sync(account, escalation)
        if not account.episode and escalation is not None and escalation.level > Level.NONE:
            account.episode = escalation.episode
            account.since, account.since_seq = ts, seq
            account.base = (account.tokens, account.usd, account.unpriced)
        if account.episode and account.reported:  # a log without usage: nothing to say about money
            cost = {"since": account.since, "since_seq": account.since_seq, **account.so_far().to_dict()}
            for detection in detections:
                detection.cost = cost

    def episode(self, session: str, escalation: Any) -> tuple[float, Spend] | None:
        """``(since, cost so far)`` of the session's open episode, if any."""
        account = self.sessions.get(session)
        if account is None:
            return None
        self._sync(account, escalation)
        return (account.since, account.so_far()) if account.episode and account.reported else None

    def loops(self, session: str) -> Spend | None:
        """What the session's loop episodes have cost in all (None: no usage reported)."""
        account = self.sessions.get(session)
        return account.loops() if account is not None and account.reported else None

    def totals(self, session: str) -> tuple[int, float, int, bool]:
        """The session's running totals and whether it reported usage (a
        sharded scan's worker records these for :func:`episode_costs`)."""
        account = self.sessions.get(session)
        if account is None:
            return (0, 0.0, 0, False)
        return (account.tokens, account.usd, account.unpriced, account.reported)

    def day(self, ts: float) -> Spend:
        """What loop episodes cost on the local day of ``ts`` (measured so far)."""
        totals = self.days.get(time.strftime("%Y-%m-%d", time.localtime(ts)))
        return Spend(totals[0], totals[1], totals[2]) if totals else Spend()


def episode_costs(found: Any) -> None:
    """Each detection's cost so far, from ``(detection, totals)`` in the
    order one engine would have raised them (``totals``: its session's
    :meth:`LoopCosts.totals` at its event).  A scan never returns a session
    to watching (no operator), so its episode begins at its first detection:
    what :meth:`LoopCosts.detected` gives, worked out after a sharded scan."""
    bases: dict[str, tuple[float, int, tuple]] = {}
    for detection, totals in found:
        since, since_seq, base = bases.setdefault(detection.session, (detection.ts, detection.seq, totals))
        tokens, usd, unpriced, reported = totals
        if not reported:
            detection.cost = None
            continue
        spend = Spend(tokens - base[0], max(0.0, usd - base[1]), unpriced - base[2])
        detection.cost = {"since": since, "since_seq": since_seq, **spend.to_dict()}
