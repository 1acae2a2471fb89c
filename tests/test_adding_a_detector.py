"""docs/development.md, "Adding a detector", is true: its example, taken from
the page as written, is a clean module that the engine runs once it is in the
detector list (here put there for the test only), with its settings and presets."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.config import build_config
from monitor.detect import REGISTRY
from monitor.detect.base import Detector
from monitor.detect.engine import Engine
from monitor.events import Event, Kind, Level

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "development.md"


def _example() -> str:
    """The page's example module, unindented."""
    section = PAGE.read_text(encoding="utf-8").split("## Adding a detector", 1)[1]
    block = re.search(r"```python\n(.*?)\n\s*```", section, re.S)
    assert block, "no example in docs/development.md's 'Adding a detector'"
    return "\n".join(line[3:] for line in block.group(1).splitlines()) + "\n"


@pytest.fixture
def documented(tmp_path, monkeypatch) -> type[Detector]:
    """The example's detector, listed as step 1 says (``DETECTORS`` -> ``REGISTRY``)."""
    path = tmp_path / "echo.py"
    path.write_text(_example(), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("monitor.detect.detectors.documented_example", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    (cls,) = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, Detector) and value.__module__ == spec.name
    ]
    monkeypatch.setitem(REGISTRY, cls.name, cls)
    return cls


def test_the_example_is_a_clean_module():
    """What a newcomer copies passes the project's lint as a detector module would."""
    ruff = Path(sys.executable).with_name("ruff")
    command = [str(ruff)] if ruff.exists() else [sys.executable, "-m", "ruff"]
    checked = subprocess.run(
        [*command, "check", "--stdin-filename", "monitor/detect/detectors/echo.py", "-"],
        input=_example(),
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _replies(texts, *, calls_between=False):
    events, ts = [], 1000.0
    for n, text in enumerate(texts):
        events.append(Event(Kind.MESSAGE, "s", ts, role="assistant", content=text))
        if calls_between:
            events.append(
                Event(Kind.TOOL_CALL, "s", ts + 1, tool="bash", args={"command": "ls"}, call_id=f"c{n}")
            )
        ts += 2
    return events


def test_the_documented_detector_runs_in_the_engine(documented):
    engine = Engine(build_config({}))
    name = documented.name
    found = engine.process_many(_replies(["Still thinking about it."] * 4))
    mine = [d for d in found if d.detector == name]
    assert [d.count for d in mine] == [3, 4] and all(d.level >= Level.WARN for d in mine)
    assert engine.summary("s").level >= Level.WARN
    assert all(ref.kind == Kind.MESSAGE.value for ref in mine[-1].evidence)


def test_the_documented_detector_leaves_narrated_work_alone(documented):
    engine = Engine(build_config({}))
    found = engine.process_many(_replies(["Checking the build again."] * 6, calls_between=True))
    assert not [d for d in found if d.detector == documented.name]


def test_its_settings_and_presets_come_from_the_config(documented):
    name = documented.name
    assert build_config({}).detector_settings(name).threshold == 3
    assert build_config({}, preset="aggressive").detector_settings(name).threshold == 2
    assert build_config({"detectors": {name: {"threshold": 5}}}).detector_settings(name).threshold == 5
    off = Engine(build_config({"detectors": {name: {"enabled": False}}}))
    assert not [d for d in off.process_many(_replies(["Again."] * 6)) if d.detector == name]
