"""What the simulated demo agents do: honest work and loops, as endless step generators.

Each scenario is a generator of *steps*; a step is a short list of native
records (without ``session``/``ts``, which the runner adds): a tool call with
its result, or a message.  Honest scenarios repeat themselves the way real
agents legitimately do — polling a job whose output moves, an edit-test cycle
whose failures fall, paging through files — and must never reach ``warn``.
Looping scenarios fall into one kind of loop each and stay in it until an
operator injects a message; :func:`recovery` is what they do afterwards.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

Record = dict[str, Any]
Step = list[Record]
Steps = Iterator[Step]


class _Calls:
    """Makes tool-call/result pairs with unique ids."""

    def __init__(self, prefix: str):
        self.prefix = prefix
        self.n = 0

    def __call__(self, name: str, args: dict[str, Any], content: str, error: bool = False) -> Step:
        self.n += 1
        cid = f"{self.prefix}-{self.n}"
        return [
            {"type": "tool_call", "id": cid, "name": name, "args": args},
            {"type": "tool_result", "id": cid, "content": content, "is_error": error},
        ]


def say(text: str, role: str = "assistant") -> Step:
    return [{"type": "message", "role": role, "content": text}]


def _pytest_report(test_file: str, failing: list[tuple[str, str]], passed: int, rng: random.Random) -> str:
    lines = [
        "============================= test session starts ==============================",
        f"collected {passed + len(failing)} items",
        "",
    ]
    if failing:
        lines.append("=================================== FAILURES ===================================")
        for name, message in failing:
            lines += [
                f"_____ {name} _____",
                f">       {message.split(':')[0].lower()}(...)",
                f"E       {message}",
                f"{test_file}:{rng.randrange(10, 200)}: AssertionError",
                "",
            ]
        lines.append("=========================== short test summary info ============================")
        lines += [f"FAILED {test_file}::{name} - {message}" for name, message in failing]
        lines.append(
            f"======== {len(failing)} failed, {passed} passed in {rng.uniform(0.1, 2):.2f}s ========"
        )
    else:
        lines.append(f"======== {passed} passed in {rng.uniform(0.1, 2):.2f}s ========")
    return "\n".join(lines)


_MODULES = (
    "invoice",
    "ledger",
    "parser",
    "scheduler",
    "auth",
    "billing",
    "export",
    "search",
    "notifier",
    "importer",
    "pricing",
    "inventory",
    "report",
    "session",
    "webhook",
)
_VERBS = (
    "rounding",
    "validation",
    "timezone handling",
    "empty input",
    "unicode names",
    "retry logic",
    "pagination",
    "caching",
    "sorting",
    "error messages",
    "defaults",
    "permissions",
)


# -- honest ----------------------------------------------------------------------------------


def poll_progress(rng: random.Random, call: _Calls) -> Steps:
    """Start build jobs and poll each one while its progress moves, then read the report."""
    for job in itertools.count(1):
        jid = f"build-{job:03d}-{rng.randrange(16**4):04x}"
        target = rng.choice(("linux-x86_64", "macos-arm64", "windows-x64", "wasm32", "linux-arm64"))
        yield say(
            rng.choice(
                (
                    f"Starting release build {job} for {target}.",
                    f"Next target: {target}. Kicking off build number {job}.",
                    f"Build {job} ({target}) goes next; I'll watch it until it finishes.",
                )
            )
        )
        yield call(
            "bash",
            {"command": f"./scripts/release.sh --target {target} --job {jid}"},
            f"queued job {jid} on runner-{rng.randrange(1, 9)}",
        )
        pct, step = 0, 0
        while pct < 100:
            step += 1
            pct = min(100, pct + rng.randrange(6, 19))
            phase = (
                "compiling" if pct < 50 else "linking" if pct < 80 else "packaging" if pct < 100 else "done"
            )
            unit = rng.choice(_MODULES)
            yield call(
                "check_job",
                {"id": jid},
                f"job {jid}: {phase} {pct}% (step {step}), last: {unit}.o built in {rng.randrange(40, 900)} ms",
            )
        yield call(
            "read_file",
            {"path": f"dist/{jid}/report.txt"},
            f"artifact {target}.tar.gz size {rng.randrange(5, 90)} MB, {rng.randrange(200, 900)} files",
        )
        yield say(f"Build {job} for {target} finished; artifact looks right.")


def edit_test_converging(rng: random.Random, call: _Calls, first_task: int = 1) -> Steps:
    """Fix failing tests one by one: each run has fewer failures until the suite passes."""
    for task in itertools.count(first_task):
        module = f"{_MODULES[task % len(_MODULES)]}{task}"
        test_file = f"tests/test_{module}.py"
        names = [f"test_{v.replace(' ', '_')}" for v in rng.sample(_VERBS, rng.randrange(2, 5))]
        messages = {
            n: f"AssertionError: assert {rng.randrange(100)} == {rng.randrange(100, 200)}" for n in names
        }
        passed = rng.randrange(10, 40)
        yield say(f"Working on {module}: {len(names)} tests fail, starting with {names[0]}.")
        for fixed in range(len(names) + 1):
            failing = [(n, messages[n]) for n in names[fixed:]]
            report = _pytest_report(test_file, failing, passed + fixed, rng)
            yield call(
                "bash",
                {"command": f"pytest -q {test_file}"},
                ("Exit code 1\n" if failing else "") + report,
                bool(failing),
            )
            if not failing:
                break
            name = failing[0][0]
            yield call(
                "read_file",
                {"path": f"src/{module}.py", "offset": 40 * fixed, "limit": 40},
                f"def {name[5:]}(value):\n    return legacy_{name[5:]}(value)  # line {40 * fixed + 3}",
            )
            yield call(
                "edit_file",
                {
                    "path": f"src/{module}.py",
                    "old_string": f"legacy_{name[5:]}(value)",
                    "new_string": f"fixed_{name[5:]}(value, strict=True)",
                },
                f"The file src/{module}.py has been updated successfully.",
            )
        yield say(f"All tests in {test_file} pass now ({passed + len(names)} passed). Moving on.")


def paging(rng: random.Random, call: _Calls, files: Iterable[str] = ()) -> Steps:
    """Read long files a page at a time with a moving offset, noting findings now and then."""
    files = files or (f"logs/{m}-{day:03d}.log" for day in itertools.count(1) for m in _MODULES)
    for path in files:
        pages = rng.randrange(4, 9)
        yield say(f"Reading {path} ({pages * 200} lines) page by page.")
        for page in range(pages):
            offset = page * 200
            body = "\n".join(
                f"{offset + i + 1}: {rng.choice(_MODULES)} {rng.choice(_VERBS)} ok" for i in range(5)
            )
            yield call("read_file", {"path": path, "offset": offset, "limit": 200}, body + "\n…")
        yield call(
            "grep",
            {"pattern": f"ERROR.*{rng.choice(_MODULES)}", "path": path},
            f"{rng.randrange(1, 20)} matches in {path}",
        )
        yield say(
            f"{path}: nothing unusual beyond {rng.randrange(1, 9)} warnings about {rng.choice(_VERBS)}."
        )


# -- loops -----------------------------------------------------------------------------------


def exact_repeat(rng: random.Random, call: _Calls) -> Steps:
    """The same call, the same empty answer, forever (design note 001: bash ls → ls → ls)."""
    yield say("Let me check whether the build directory has the artifacts.")
    while True:
        yield call("bash", {"command": "ls -la build/"}, "total 0")


def ab_cycle(rng: random.Random, call: _Calls) -> Steps:
    """Read the config, run the app, read the config again, run the app again…"""
    yield say("The app fails on start; I'll look at the config and try again.")
    while True:
        yield call(
            "read_file",
            {"path": "config/settings.py"},
            "DATABASE_URL = os.environ['DATABASE_URL']\nDEBUG = False",
        )
        yield call("bash", {"command": "python -m app"}, "Exit code 1\nKeyError: 'DATABASE_URL'", True)


def same_error(rng: random.Random, call: _Calls) -> Steps:
    """Different ways of starting a program, all ending in the same ModuleNotFoundError."""
    yield say("Let me start the service.")
    variants = (
        "python app.py",
        "python3 app.py",
        "python -m app",
        "PYTHONPATH=. python app.py",
        "uv run app.py",
        "./app.py",
        "pipenv run python app.py",
        "python3 -m app --port 8080",
        "env -i python3 app.py",
        "python3 -X dev app.py",
    )
    for n in itertools.count():
        command = variants[n % len(variants)] + ("" if n < len(variants) else f" --try {n}")
        line = rng.randrange(1, 40)
        yield call(
            "bash",
            {"command": command},
            f'Traceback (most recent call last):\n  File "/srv/app.py", line {line}, in <module>\n'
            "    import requests\nModuleNotFoundError: No module named 'requests'",
            True,
        )


def monologue(rng: random.Random, call: _Calls) -> Steps:
    """Assistant turn after assistant turn, no tool call, no user in between."""
    thoughts = (
        "I should look at how the cache is invalidated before changing anything.",
        "Thinking about it more, the invalidation might happen in the middleware instead.",
        "Before touching the middleware I want to be sure about the request lifecycle.",
        "The lifecycle suggests the cache key is computed too early, which would explain it.",
        "If the key is computed early, then the fix belongs in the key builder, not the middleware.",
        "Although the key builder is shared, so a change there could affect the export jobs too.",
        "Maybe the safest plan is to reconsider the invalidation strategy as a whole.",
    )
    yield call("read_file", {"path": "src/cache.py"}, "class Cache:\n    def key(self, request): ...")
    for n in itertools.count():
        yield say(thoughts[n % len(thoughts)])


def chanting(rng: random.Random, call: _Calls) -> Steps:
    """The same sentence over and over inside one reply (a degenerate generation)."""
    yield call("read_file", {"path": "src/importer.py"}, "def run(rows):\n    for row in rows: ...")
    phrase = "I will now fix the import of the rows so that the importer works. "
    while True:
        yield say("Here is my plan. " + phrase * rng.randrange(12, 20))


def stuck_tests(rng: random.Random, call: _Calls) -> Steps:
    """Edit, run the tests, the same failure; edit differently, the same failure again."""
    failing = [("test_total_with_discount", "AssertionError: assert 90.0 == 81.0")]
    tweak = itertools.count(1)
    yield say("The discount test fails; I'll fix the computation.")
    while True:
        n = next(tweak)
        yield call(
            "edit_file",
            {
                "path": "shop/discount.py",
                "old_string": f"attempt {n - 1}",
                "new_string": f"attempt {n}: price * (1 - pct / {100 + n})",
            },
            "The file shop/discount.py has been updated successfully.",
        )
        yield call(
            "bash",
            {"command": "pytest -q tests/test_discount.py"},
            "Exit code 1\n" + _pytest_report("tests/test_discount.py", failing, 14, rng),
            True,
        )


# -- after an inject -----------------------------------------------------------------------------


def recovery(rng: random.Random, call: _Calls, scenario: str) -> Steps:
    """What a looping agent does once an operator has told it to change course: honest work."""
    yield say(
        f"Understood. I'll stop what I was repeating ({scenario.replace('_', ' ')}) and take a "
        "different approach: first re-read the relevant docs, then fix things step by step."
    )
    yield from paging(rng, call, files=(f"docs/{scenario}-notes.md", "docs/architecture.md"))
    yield say("I have what I need from the docs; now fixing the failing tests one at a time.")
    yield from edit_test_converging(rng, call, first_task=100)


@dataclass(frozen=True)
class Scenario:
    name: str
    honest: bool
    description: str
    steps: Callable[[random.Random, _Calls], Steps]


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("poll_progress", True, "polls build jobs whose progress moves", poll_progress),
        Scenario("edit_test", True, "edit-test cycles whose failures fall to zero", edit_test_converging),
        Scenario("paging", True, "reads long files page by page", paging),
        Scenario("exact_repeat", False, "runs `ls -la build/` again and again", exact_repeat),
        Scenario("ab_cycle", False, "alternates reading the config and running the app", ab_cycle),
        Scenario("same_error", False, "starts the app in ten ways, same ModuleNotFoundError", same_error),
        Scenario("monologue", False, "thinks out loud without ever using a tool", monologue),
        Scenario("chanting", False, "repeats one sentence over and over in its replies", chanting),
        Scenario("stuck_tests", False, "edits and reruns a test that fails the same way", stuck_tests),
    )
}


def steps(name: str, rng: random.Random, prefix: str = "c") -> tuple[Steps, Callable[[], Steps]]:
    """The scenario's step generator and a factory for its recovery after an inject."""
    scenario = SCENARIOS[name]
    call = _Calls(prefix)
    return scenario.steps(rng, call), lambda: recovery(rng, call, name)
