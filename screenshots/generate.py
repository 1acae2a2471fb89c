"""Generate the README's screenshots: one SVG per screen, from the scripted demo.

The data is :mod:`tests.scripted` fed through a real hub and store with a
frozen clock (TZ=UTC), so the SVGs only change when the UI does.  Run with
``make screenshots`` (or ``python screenshots/generate.py [--size 160x48]``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ["TZ"] = "UTC"
time.tzset()
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from monitor.config import Config  # noqa: E402
from monitor.store import Store  # noqa: E402
from monitor.ui.app import LoopwatchApp  # noqa: E402
from tests.scripted import frozen_clock, scripted_hub  # noqa: E402

#: file name -> (mode, keys to press, theme)
SHOTS: dict[str, tuple[str, tuple[str, ...], str | None]] = {
    "dashboard": ("live", (), None),
    "detail": ("live", ("enter",), None),
    "inject": ("live", ("i",), None),
    "kill": ("live", ("K",), None),
    "help": ("live", ("question_mark",), None),
    "history": ("history", (), None),
    "history-detail": ("history", ("down", "enter"), None),
    "theme-light": ("live", (), "loopwatch-light"),
    "theme-high-contrast": ("live", (), "loopwatch-high-contrast"),
    "theme-ansi": ("live", (), "loopwatch-ansi"),
}


async def record_history(db: Path) -> None:
    async with scripted_hub(Config(), db=db):
        pass


async def shoot(
    name: str,
    mode: str,
    keys: tuple[str, ...],
    theme: str | None,
    size: tuple[int, int],
    workdir: Path,
    out: Path,
) -> Path:
    config = Config()
    if mode == "history":
        db = workdir / f"{name}.sqlite"
        await record_history(db)
        app = LoopwatchApp(config, store=Store(db), mode="history", clock=frozen_clock(), theme=theme)
    else:
        db = workdir / f"{name}.sqlite"
        app = LoopwatchApp(
            config, clock=frozen_clock(), theme=theme, hub_factory=lambda: scripted_hub(config, db=db)
        )
    async with app.run_test(size=size) as pilot:
        for key in ("", *keys):
            if key:
                await pilot.press(key)
            await pilot.pause()
            await app.workers.wait_for_complete()
            app.flush_live()
            await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        path = out / f"{name}.svg"
        path.write_text(app.export_screenshot(title=f"loopwatch — {name.replace('-', ' ')}"))
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="160x48", help="terminal size COLSxROWS (default 160x48)")
    parser.add_argument("--out", default=str(HERE), help="directory for the SVGs")
    parser.add_argument("only", nargs="*", help="names of the screenshots to make (default: all)")
    args = parser.parse_args()
    cols, rows = (int(n) for n in args.size.lower().split("x"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (mode, keys, theme) in SHOTS.items():
            if args.only and name not in args.only:
                continue
            path = asyncio.run(shoot(name, mode, keys, theme, (cols, rows), Path(tmp), out))
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
