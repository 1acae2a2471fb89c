"""What a loop costs (issue 18): tokens and dollars from the usage real logs
report, per loop episode, on every detection, in the store, `history`, the
Markdown export and the dashboard.

The accounting runs on real records: a Claude Code transcript and a Codex
rollout from tests/fixtures, and a loop built from a real transcript's own
records (its Bash call and result, repeated as an agent stuck on them would).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from monitor.config import ConfigError, build_config
from monitor.cost import (
    PRICES_FILE,
    LoopCosts,
    Price,
    PriceTable,
    Spend,
    default_prices,
    load_price_table,
    usage_parts,
)
from monitor.detect.engine import Engine
from monitor.events import Event, Kind, Level
from tests.formatkit import decode_file
from tests.test_history_cli import loopwatch, record

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLAUDE = FIXTURES / "claude-code" / "tool_heavy.jsonl"
CODEX = FIXTURES / "codex" / "rollout-2026-02-23T12-41-04-019c8a4d-8f45-7010-8b5d-7fad920aa6f9.jsonl"
REPEATS = 6


def raw_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def claude_loop(tmp_path: Path, repeats: int = REPEATS) -> tuple[Path, dict]:
    """The transcript's opening, then its first Bash call (record 5, with its API
    usage) and that call's result (record 11) repeated: fresh ids, later times,
    the same command and output.  Returns the file and record 5's usage."""
    records = raw_records(CLAUDE)
    call, result = records[4], records[10]
    assert (
        call["message"]["content"][0]["name"] == "Bash"
        and result["message"]["content"][0]["type"] == "tool_result"
    )
    lines = records[:4]
    start = time.mktime(time.strptime("2026-02-23 10:00:00", "%Y-%m-%d %H:%M:%S"))
    for n in range(repeats):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(start + 10 * n))
        again = json.loads(json.dumps(call))
        again.update(uuid=f"00000000-0000-4000-8000-{n:012d}", timestamp=stamp)
        again["message"]["id"] = f"msg_loop{n}"
        again["message"]["content"][0]["id"] = f"toolu_loop{n}"
        answer = json.loads(json.dumps(result))
        answer.update(uuid=f"00000000-0000-4000-9000-{n:012d}", timestamp=stamp)
        answer["message"]["content"][0]["tool_use_id"] = f"toolu_loop{n}"
        lines += [again, answer]
    path = tmp_path / "looping-claude.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path, call["message"]


def priced(usage: dict, price: Price) -> tuple[int, float]:
    """Tokens and dollars of one Anthropic ``usage`` object, by hand."""
    plain, out = usage["input_tokens"], usage["output_tokens"]
    write, read = usage.get("cache_creation_input_tokens", 0), usage.get("cache_read_input_tokens", 0)
    dollars = (
        plain * price.input + out * price.output + write * price.cache_write + read * price.cache_read
    ) / 1e6
    return plain + out + write + read, dollars


# -- the adapters give tokens and the model ---------------------------------------------------


def test_claude_usage_has_tokens_and_model_per_message():
    """Each API message's usage once, with its model and cache counts: priced as Anthropic bills it."""
    events, _ = decode_file(CLAUDE)
    usage = [e for e in events if e.kind is Kind.USAGE]
    first = next(r for r in raw_records(CLAUDE) if r.get("type") == "assistant")["message"]
    event = usage[0]
    assert event.meta["model"] == first["model"]
    u = first["usage"]
    assert usage_parts(event) == (
        u["input_tokens"],
        u["output_tokens"],
        u["cache_creation_input_tokens"],
        u["cache_read_input_tokens"],
    )
    costs = LoopCosts()
    costs.usage(event, None)
    tokens, dollars = priced(u, default_prices().price(first["model"]))
    account = costs.sessions[event.session]
    assert (account.tokens, account.model) == (tokens, first["model"])
    assert account.usd == pytest.approx(dollars)


def test_codex_usage_is_priced_at_the_turn_context_model():
    """token_count's last usage, once per API call, priced at the model of the turn
    (turn_context), its cached input at the cache-read rate."""
    events, _ = decode_file(CODEX)
    usage = [e for e in events if e.kind is Kind.USAGE]
    counts = [
        r["payload"]["info"]["last_token_usage"]
        for r in raw_records(CODEX)
        if r.get("type") == "event_msg"
        and r["payload"].get("type") == "token_count"
        and r["payload"].get("info")
    ]
    assert usage and all(e.meta["model"] == "gpt-5.3-codex" for e in usage)
    costs = LoopCosts()
    for event in usage:
        costs.usage(event, None)
    price = default_prices().price("gpt-5.3-codex")
    last = counts[0]
    plain, out, write, read = usage_parts(usage[0])
    assert (plain, out, write, read) == (
        last["input_tokens"] - last["cached_input_tokens"],
        last["output_tokens"],
        0,
        last["cached_input_tokens"],
    )
    expected = sum(
        (
            (e.input_tokens - e.meta.get("cached_input_tokens", 0)) * price.input
            + e.meta.get("cached_input_tokens", 0) * price.cache_read
            + e.output_tokens * price.output
        )
        / 1e6
        for e in usage
    )
    account = costs.sessions[usage[0].session]
    assert account.usd == pytest.approx(expected) and account.unpriced == 0


# -- the price table ---------------------------------------------------------------------------


def test_price_table_matches_snapshots_and_routers_never_similar_names():
    table = load_price_table(PRICES_FILE)
    assert table.date and "anthropic" in table.source.lower()
    sonnet = table.price("claude-sonnet-4-5")
    assert table.price("claude-sonnet-4-5-20250929") == sonnet
    assert table.price("google/gemini-3-pro-preview") == table.price("gemini-3-pro-preview") is not None
    for unknown in ("claude-sonnet-4-5-preview", "claude-opus-9", "gpt-5.3", "", None):
        assert table.price(unknown) is None


def test_unknown_model_is_unpriced_and_reported_cost_is_taken_at_its_word():
    costs = LoopCosts(PriceTable({}))
    costs.usage(
        Event(Kind.USAGE, "s", 1.0, input_tokens=1000, output_tokens=200, meta={"model": "mystery-1"}), None
    )
    costs.usage(Event(Kind.USAGE, "t", 1.0, input_tokens=1000, output_tokens=200, cost_usd=0.5), None)
    assert costs.sessions["s"].usd == 0 and costs.sessions["s"].unpriced == 1200
    spend = Spend(1200, 0.0, 1200)
    assert spend.dollars() == "unpriced" and spend.text() == "1.2k tok · unpriced"
    assert Spend(3000, 0.42, 1000).text() == "3.0k tok · $0.42 (+1.0k tok unpriced)"
    assert costs.sessions["t"].usd == 0.5 and costs.sessions["t"].unpriced == 0


def test_config_prices_override_the_table_strictly():
    config = build_config(
        {
            "prices": {
                "mystery-1": {"input": 1, "output": 2, "cache_write": 1, "cache_read": 0.1},
                "claude-sonnet-4-5": {"input": 0, "output": 0, "cache_write": 0, "cache_read": 0},
            }
        }
    )
    assert config.prices.price("mystery-1") == Price(1.0, 2.0, 1.0, 0.1)
    assert config.prices.price("claude-sonnet-4-5-20250929").output == 0
    assert config.prices.price("claude-opus-4-5") == default_prices().price("claude-opus-4-5")
    for bad, message in (
        ({"m": {"input": 1}}, "prices.m.output: missing"),
        (
            {"m": {"input": "1", "output": 1, "cache_write": 1, "cache_read": 1}},
            "prices.m.input: expected a number",
        ),
        (
            {"m": {"input": -1, "output": 1, "cache_write": 1, "cache_read": 1}},
            "must be a finite number not below 0",
        ),
        ({"m": {"inptu": 1}}, "prices.m.inptu: unknown key"),
        ({"m": 3}, "prices.m: expected a table"),
    ):
        with pytest.raises(ConfigError, match=message):
            build_config({"prices": bad})


# -- episodes ----------------------------------------------------------------------------------


def test_a_loop_on_real_records_costs_what_its_responses_cost(tmp_path):
    """Every detection carries the episode's cost so far: the usage of the
    responses since the session left watching, growing with each repeat."""
    path, message = claude_loop(tmp_path)
    events, _ = decode_file(path)
    engine = Engine()
    detections = []
    for event in events:
        detections += engine.process(event).detections
    assert detections and all(d.cost is not None for d in detections)
    tokens, dollars = priced(message["usage"], default_prices().price(message["model"]))
    first = detections[0]
    # The episode began at the detection: the responses after it count.
    after = sum(1 for e in events if e.kind is Kind.USAGE and e.seq > first.seq)
    session = first.session
    account = engine.costs.sessions[session]
    assert account.loops() == Spend(after * tokens, pytest.approx(after * dollars), 0)
    spent = [d.cost["tokens"] for d in detections]
    assert spent == sorted(spent) and spent[0] < spent[-1]
    assert detections[-1].cost["usd"] == pytest.approx(detections[-1].cost["tokens"] / tokens * dollars)
    assert detections[-1].cost["since"] == first.ts
    # Measured, per day: the header's figure.
    assert engine.costs.day(events[-1].ts).tokens == after * tokens
    since, spend = engine.costs.episode(session, engine.policy.sessions[session])
    assert since == first.ts and spend.tokens == after * tokens


def test_an_acknowledgement_ends_the_episode_and_a_relapse_starts_anew(tmp_path):
    path, message = claude_loop(tmp_path, repeats=REPEATS * 2)
    events, _ = decode_file(path)
    tokens, _ = priced(message["usage"], default_prices().price(message["model"]))
    half = next(
        i for i, e in enumerate(events) if e.kind is Kind.USAGE and e.meta.get("message_id") == "msg_loop5"
    )
    engine = Engine()
    for event in events[:half]:
        engine.process(event).detections
    session = events[0].session
    looped = engine.costs.loops(session)
    engine.policy.acknowledge(session, events[half].ts)
    assert engine.costs.episode(session, engine.policy.sessions[session]) is None
    relapse = []
    for event in events[half:]:
        relapse += engine.process(event).detections
    # Quieted repeats are notices that leave the session watching (no cost: no episode);
    # the loop breaking through (twice as bad) is a new episode.
    assert relapse and relapse[0].suppressed and relapse[0].cost is None
    counted = [d for d in relapse if d.suppressed is None]
    assert counted and counted[0].cost["since"] == counted[0].ts
    assert counted[0].cost["tokens"] < looped.tokens + tokens
    assert engine.costs.loops(session).tokens > looped.tokens


def test_a_session_without_usage_says_nothing_about_money(tmp_path):
    engine = Engine()
    log = tmp_path / "plain.jsonl"
    lines = [{"type": "session_start", "session": "p", "agent": "a", "ts": 1.0}]
    for n in range(6):
        lines += [
            {
                "type": "tool_call",
                "session": "p",
                "id": f"c{n}",
                "name": "bash",
                "args": {"cmd": "ls"},
                "ts": 2.0 + n,
            },
            {"type": "tool_result", "session": "p", "id": f"c{n}", "content": "", "ts": 2.5 + n},
        ]
    log.write_text("".join(json.dumps(r) + "\n" for r in lines))
    found = [d for e in decode_file(log)[0] for d in engine.process(e).detections]
    assert found and all(d.cost is None and "cost" not in d.to_dict() for d in found)
    assert engine.costs.loops("p") is None


def test_accounting_is_constant_per_event():
    """A long session keeps no per-event state: an account is a dozen numbers."""
    costs = LoopCosts()

    class Escalation:
        level, episode = Level.WARN, 1

    costs.detected("s", [], Escalation, 0.0)
    for n in range(10_000):
        costs.usage(
            Event(
                Kind.USAGE,
                "s",
                float(n),
                input_tokens=100,
                output_tokens=10,
                meta={"model": "claude-sonnet-4-5"},
            ),
            Escalation,
        )
    account = costs.sessions["s"]
    assert account.loops().tokens == 1_100_000 and len(costs.days) == 1
    assert not hasattr(account, "__dict__")  # slots: nothing grows


# -- stored, history, export -------------------------------------------------------------------


@pytest.fixture
def stored(tmp_path):
    path, message = claude_loop(tmp_path)
    db = tmp_path / "loopwatch.db"
    record(db, [path]).close()
    return db, message


def test_store_keeps_detection_costs_and_session_loop_totals(stored):
    db, message = stored
    with sqlite3.connect(db) as conn:
        costs = [json.loads(c) for (c,) in conn.execute("SELECT cost FROM detections ORDER BY id")]
        row = conn.execute("SELECT loop_tokens, loop_usd, loop_unpriced_tokens FROM sessions").fetchone()
        version = conn.execute("SELECT MAX(version) FROM schema_version").fetchone()[0]
    assert version >= 7 and costs and all(c["tokens"] >= 0 for c in costs)
    tokens, dollars = priced(message["usage"], default_prices().price(message["model"]))
    assert row[0] and row[0] % tokens == 0 and row[1] == pytest.approx(row[0] / tokens * dollars)
    assert row[2] == 0


def test_history_and_markdown_export_carry_the_figures(stored):
    db, _ = stored
    with sqlite3.connect(db) as conn:
        session, usd = conn.execute("SELECT id, loop_usd FROM sessions").fetchone()
    listing = loopwatch("history", "--db", str(db))
    assert listing.returncode == 0, listing.stderr
    assert "LOOP COST" in listing.stdout and f"${usd:,.2f}" in listing.stdout
    shown = loopwatch("show", session, "--db", str(db), "--format", "markdown")
    assert shown.returncode == 0, shown.stderr
    assert "| Loop cost | " in shown.stdout and f"${usd:,.2f}" in shown.stdout
    assert "Loop so far:" in shown.stdout and "loop so far" in shown.stdout
    document = json.loads(loopwatch("show", session, "--db", str(db), "--format", "json").stdout)
    assert document["loop_cost"]["usd"] == pytest.approx(usd)
    assert all("tokens" in d["cost"] for d in document["detections"])


def test_an_old_database_gains_the_columns(tmp_path):
    """Opening a v6 database migrates it: old rows cost nothing known (0 / NULL)."""
    from sqlite_utils import Database

    from monitor.store import schema as store_schema

    path = tmp_path / "old.db"
    db = Database(path)
    store_schema.migrate(db, upto=6)
    db.execute("INSERT INTO sessions (id, events, detections) VALUES ('old', 3, 1)")
    db.conn.commit()
    db.close()
    from monitor.store import Store

    with Store(path) as store:
        row = store.get_session("old")
    assert (row["loop_tokens"], row["loop_usd"]) == (0, 0)


# -- the dashboard and the detail view ---------------------------------------------------------


def priced_loop() -> list:
    """A scripted session looping on one call, each response reporting its usage."""
    from tests.scripted import T0, ScriptedSession

    script = ScriptedSession("spender", "claude-code", T0, "/logs/spender.jsonl")
    for _ in range(6):
        script.call("bash", {"command": "pytest -x"}, "1 failed")
        script.add(
            Kind.USAGE,
            step=0.5,
            input_tokens=20_000,
            output_tokens=1_000,
            meta={"model": "claude-sonnet-4-5", "cache_read_input_tokens": 15_000},
        )
    return script.events


@pytest.mark.usefixtures("utc")
async def test_header_and_detail_show_what_the_loop_cost(tmp_path):
    from monitor.config import Config
    from monitor.ui.app import LoopwatchApp
    from monitor.ui.widgets.dashboard.counts import CountsBar
    from monitor.ui.widgets.dashboard.detections_feed import DetectionsFeed
    from monitor.ui.widgets.detail.detections_list import DetectionsList
    from tests.scripted import frozen_clock, scripted_hub

    config = Config()
    app = LoopwatchApp(
        config,
        clock=frozen_clock(),
        hub_factory=lambda: scripted_hub(config, db=tmp_path / "db.sqlite", events=priced_loop()),
    )
    # Each response: 5,000 plain input, 15,000 cache reads, 1,000 output at Sonnet 4.5's rates.
    per_response = (5_000 * 3.0 + 15_000 * 0.30 + 1_000 * 15.0) / 1e6
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause()
        await app.workers.wait_for_complete()
        app.hub.publish(app.hub.stats())
        app.flush_live()
        await pilot.pause()
        header = str(app.screen.query_one(CountsBar).render())
        today = app.hub.stats().loop_cost_today
        assert today.tokens and today.tokens % 21_000 == 0
        assert f"loops today ${today.usd:,.2f}" in header
        assert today.usd == pytest.approx(today.tokens / 21_000 * per_response)
        feed = "\n".join(line.text for line in app.screen.query_one(DetectionsFeed).lines)
        assert "[$" in feed
        app.open_session("spender")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        header = str(app.screen.query_one("#detail-header").render())
        assert "this loop so far" in header and f"${today.usd:,.2f}" in header
        assert "loops in this session" in header
        rows = app.screen.query_one(DetectionsList).rows
        # The last detection came at the last result, before that response's usage.
        assert rows and rows[-1].cost is not None and rows[-1].cost.tokens == today.tokens - 21_000


@pytest.mark.usefixtures("utc")
async def test_history_screen_lists_what_each_session_s_loops_cost(tmp_path):
    """A hub records the priced loop and stops; the history screen has its loop cost."""
    from textual.widgets import DataTable

    from monitor.config import Config
    from monitor.store import Store
    from monitor.ui.app import LoopwatchApp
    from tests.scripted import frozen_clock, scripted_hub

    db = tmp_path / "history.sqlite"
    async with scripted_hub(Config(), db=db, events=priced_loop()) as hub:
        expected = hub.engine.costs.loops("spender")
    app = LoopwatchApp(Config(), store=Store(db), mode="history", clock=frozen_clock())
    async with app.run_test(size=(160, 30)) as pilot:
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        row = table.get_row("spender")
        cell = str(row[[c.key.value for c in table.ordered_columns].index("loops")])
        assert expected.usd > 0 and cell == f"${expected.usd:,.2f}"


def test_usage_parts_reads_cache_within_or_beside_the_input():
    within = Event(
        Kind.USAGE,
        "s",
        1.0,
        input_tokens=20_000,
        output_tokens=10,
        meta={"cache_read_input_tokens": 15_000, "cache_creation_input_tokens": 1_000},
    )
    beside = Event(
        Kind.USAGE, "s", 1.0, input_tokens=500, output_tokens=10, meta={"cache_read_input_tokens": 15_000}
    )
    assert usage_parts(within) == (4_000, 10, 1_000, 15_000)
    assert usage_parts(beside) == (500, 10, 0, 15_000)
    assert usage_parts(Event(Kind.USAGE, "s", 1.0, input_tokens=-3, output_tokens=True)) == (0, 0, 0, 0)
