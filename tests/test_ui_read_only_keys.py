"""Read-only views say why an operator key does nothing (issue 33 §3: ``open`` and the
history ignored ``a``/``K``/``i`` without a word).

Real parts: a real SQLite store recorded by a scripted hub, the real app in its
``open`` and ``history`` modes, driven by Pilot.
"""

from __future__ import annotations

from pathlib import Path

from monitor.ui.screens.detail import SessionDetailScreen
from tests.scripted import history_app, settle


def _told(app) -> list[str]:
    return [f"{n.title}: {n.message}" for n in app._notifications]


async def test_an_operator_key_in_a_stored_session_says_it_is_read_only(tmp_path: Path):
    app = await history_app(tmp_path, mode="open", session="claude-7f3a")
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionDetailScreen) and app.screen.read_only
        for key in ("a", "K", "i"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, SessionDetailScreen)  # no dialog opened
        told = _told(app)
        assert len(told) == 3 and all(t.startswith("Read-only") for t in told), told
        assert "acknowledge" in told[0] and "kill" in told[1] and "inject" in told[2], told
        assert "loopwatch watch" in told[0]


async def test_an_operator_key_in_the_history_says_it_is_read_only_but_typing_a_filter_does_not(
    tmp_path: Path,
):
    app = await history_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        table = app.screen.query_one("#history-table")
        table.focus()
        await pilot.press("K")
        await pilot.pause()
        assert [t.split(":")[0] for t in _told(app)] == ["Read-only"], _told(app)
        agent = app.screen.query_one("#agent")
        agent.focus()
        await pilot.press("a", "i")
        await pilot.pause()
        assert agent.value == "ai" and len(_told(app)) == 1  # typed into the filter, not refused
