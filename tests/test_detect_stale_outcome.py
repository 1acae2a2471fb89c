"""Stale outcomes: the agent keeps acting, the outcome is no longer new (issue 31)."""

import pytest

from monitor.config import ConfigError, build_config
from monitor.detect.analysis.outcomes import (
    EMPTY,
    FAILURE,
    REJECTED,
    normalise,
    outcome_of,
    reply_outcome,
)
from monitor.detect.base import SessionView
from monitor.detect.detectors.stale_outcome import CALLS_PER_ROUND, StaleOutcome, StaleOutcomeSettings
from monitor.detect.engine import Engine
from monitor.events import Event, Kind, Level
from tests.eventkit import only
from tests.streams import Stream, by
from tests.streams import run as run_all

NAME = "stale_outcome"


def run(*streams: Stream):
    """The streams through an engine where only this detector runs."""
    return run_all(*streams, engine=Engine(only(NAME)))


def _result(content: str, tool: str = "bash", error: bool = False, **args) -> Event:
    call = Event(kind=Kind.TOOL_CALL, session="s", ts=1.0, tool=tool, args=args or {"command": "x"})
    result = Event(kind=Kind.TOOL_RESULT, session="s", ts=2.0, tool=tool, content=content, is_error=error)
    result.call = call
    return result


# -- reading outcomes from text ---------------------------------------------------


def test_normalise_drops_what_varies_by_accident():
    a = "\x1b[31mERROR\x1b[0m 2026-04-08T20:04:45.443Z /tmp/tmpab12cd/x.py:12 at 0x7f3a2b pid 1858 commit 9f3e2a1b"
    b = "\x1b[31mERROR\x1b[0m 2026-04-09T21:14:05.003Z /tmp/tmpzz99yy/x.py:40 at 0x7f99aa pid 2327 commit 0c1d2e3f"
    assert normalise(a) == normalise(b)
    assert normalise("No module named 'pytz'") != normalise("No module named 'sqlparse'")


def test_a_quoted_search_term_is_dropped_only_for_an_empty_search():
    assert normalise('No matches found for "data classes"', query=True) == normalise(
        'No matches found for "Kotlin constructors"', query=True
    )
    assert normalise('No matches found for "data classes"') != normalise('No matches found for "Kotlin"')


def test_failure_from_text_without_an_exit_code():
    """A non-error result whose output ends in an error line failed (SWE-agent, Aider, piped output)."""
    found = outcome_of(
        _result("Compiling...\nError: failed to resolve file: lib/x.sol", command="forge build | tail")
    )
    assert found is not None and found.kind == FAILURE
    assert outcome_of(_result("line one\nValueError: bad\nmore output\nall good now\nfine\nok\nend")) is None


def test_an_error_line_inside_a_file_read_is_no_outcome():
    text = "def f():\n    raise ValueError('x')\n\n# Error handling below\nreturn 1\nx = 2\ny = 3\nz = 4"
    assert outcome_of(_result(text, tool="read_file", path="a.py")) is None


def test_a_numbered_listing_of_a_file_is_no_failure():
    """SWE-agent's file viewer prints numbered lines (tests/corpus coder-gpt4 django-15202):
    a view ending in `589:    raise ValidationError(...)` quotes the file. The error a run
    ends in is still read."""
    view = (
        "[File: /repo/django/forms/fields.py (1287 lines total)]\n(588 more lines above)\n"
        "588:        if value in self.empty_values:\n"
        "589:            raise ValidationError(self.error_messages['contradiction'], code='contradiction')\n"
        "(698 more lines below)"
    )
    assert outcome_of(_result(view, tool="scroll_down", command="scroll_down")) is None
    listing = "587\tdef clean(self):\n588\t    x = 1\n589\t    raise ValidationError('bad')"
    assert outcome_of(_result(listing, command="cat -n fields.py")) is None
    ran = outcome_of(_result(listing + "\nValueError: bad value", command="python fields.py"))
    assert ran is not None and ran.kind == FAILURE


def test_the_generic_line_is_never_the_telling_one():
    a = outcome_of(_result("foo.go:9: use of internal package\n\n(Command exited with code 1)", error=True))
    b = outcome_of(
        _result('foo.go:4: "encoding" imported and not used\n\n(Command exited with code 1)', error=True)
    )
    assert a is not None and b is not None and a.key != b.key


def test_harness_rejections_and_empty_searches():
    refused = outcome_of(_result("ERROR! Your Patch is empty. Please check your diff.", tool="submit"))
    assert refused is not None and refused.kind == REJECTED
    empty = outcome_of(_result('No matches found for "data classes" in /repo', tool="find_file", name="x"))
    assert empty is not None and empty.kind == EMPTY
    # The same words from a call that does not search: a failed lookup, not an empty search.
    lookup = outcome_of(_result("No session found for 2327", tool="process", action="poll"))
    assert lookup is not None and lookup.kind == FAILURE


def test_an_empty_search_is_read_in_any_case_and_through_colours():
    # The words an empty search's line holds are tested before the search's pattern:
    # in any case, and joined again where colours split them.
    for text in (
        "NO MATCHES FOUND",
        "No matches \x1b[1mfou\x1b[0mnd for 'x'",
        "Found 0 files",
        "grep: 0 matches",
    ):
        found = outcome_of(_result(text, tool="grep_search", pattern="x"))
        assert found is not None and found.kind == EMPTY, text
        assert found.body == frozenset()  # only a failure's lines are compared
    assert outcome_of(_result("src/a.py: 3 hits", tool="grep_search", pattern="x")) is None


def test_a_refusal_in_a_user_message_and_a_person_saying_continue():
    refusal = Event(
        kind=Kind.MESSAGE,
        session="s",
        ts=1.0,
        role="user",
        content="No tool calls found in the response. Every response MUST include at least one tool call.",
    )
    assert reply_outcome(refusal) is not None
    person = Event(kind=Kind.MESSAGE, session="s", ts=1.0, role="user", content="continue")
    assert reply_outcome(person) is None


# -- the detector -----------------------------------------------------------------


def test_the_same_hook_rejection_after_small_edits_warns():
    """Issue 31 item 3: the same commit retried while the hook rejects it, small edits between."""
    s = Stream()
    for i in range(5):
        s.call("edit", "The file lib/app.ex has been updated.", path="lib/app.ex", old=f"a{i}", new=f"b{i}")
        s.call(
            "bash",
            f"Running dialyzer...\ndone in {i + 3}.2s\nPre-commit validation failed",
            command=f'git add -A && git commit -m "fix {i}"',
        )
    _, found = run(s)
    hits = by(found, NAME)
    assert hits and hits[0].line == 12 and hits[0].count == 3


def test_prose_run_as_bash_warns():
    """Issue 31 item 1: replies in prose run as commands, the same error at every step."""
    s = Stream()
    for i, word in enumerate(["DISCUSSION", "First,", "DISCUSSION", "The", "DISCUSSION"]):
        s.call(
            "bash",
            f"bash: line {i + 1}: {word}: command not found",
            command=f"{word} I think the shell is broken (attempt {i})",
        )
    _, found = run(s)
    assert by(found, NAME)


def test_no_tool_calls_in_a_row_warns_and_scattered_ones_do_not():
    refusal = "No tool calls found in the response. Every response MUST include at least one tool call."
    s = Stream()
    for _ in range(4):
        s.say(refusal, role="user")
    _, found = run(s)
    assert by(found, NAME)
    s = Stream()
    for i in range(8):
        s.say(refusal, role="user")
        s.say(refusal, role="user")
        s.call("bash", f"contents of part {i}\n" * 3, command=f"sed -n '{i * 40},{i * 40 + 40}p' a.py")
    _, found = run(s)
    assert not by(found, NAME)


def test_different_errors_after_each_fix_stay_quiet():
    """Installing missing dependencies one by one: each failure is a different error."""
    s = Stream()
    for module in ["asgiref", "pytz", "sqlparse", "django_extensions", "psycopg2"]:
        s.call(
            "bash",
            f"Traceback (most recent call last):\nModuleNotFoundError: No module named '{module}'",
            error=True,
            command=f"pip install x && python repro.py # {module}",
        )
    _, found = run(s)
    assert not by(found, NAME)


def test_a_rerun_that_shows_something_new_is_new():
    """The same final error, but every run prints a new debug probe: learning, not looping."""
    s = Stream()
    for i in range(6):
        s.call(
            "bash",
            f"DEBUG probe {'abcdefghij'[i]}: value type str\nsqlite3.InterfaceError: Error binding parameter",
            error=True,
            command="python repro.py",
        )
        s.call("edit", "ok", path="q.py", old=f"p{i}", new=f"q{i}")
    _, found = run(s)
    assert not by(found, NAME)


def test_searches_for_different_things_that_find_nothing():
    """Exploring up to seven; eight of the last ten finding nothing is guessing."""
    s = Stream()
    for i in range(7):
        s.call("find_file", f'No matches found for "name{i}" in /repo', name=f"name{i}")
    _, found = run(s)
    assert not by(found, NAME)
    s.call("find_file", 'No matches found for "name7" in /repo', name="name7")
    _, found = run(s)
    assert by(found, NAME)


def test_short_successes_never_count():
    s = Stream()
    for i in range(10):
        s.call("bash", "Build succeeded.\n0 warnings", command=f"make target{i}")
    _, found = run(s)
    assert not by(found, NAME, min_level=Level.NOTICE)


def test_state_is_bounded_by_the_window():
    detector = StaleOutcome(StaleOutcomeSettings(window=5, span=4, long_span=5))
    view = SessionView("s1")
    for i in range(50):
        detector.observe(_result(f"error: thing {i} broke", error=True, command=f"step {i}"), view)
    # A round may hold a reply's parallel calls: a few results per round of the window are kept.
    assert len(detector.rounds) == CALLS_PER_ROUND * 5


def test_settings_are_bounded_in_the_config():
    with pytest.raises(ConfigError):
        build_config({"detectors": {NAME: {"threshold": 1}}})
    with pytest.raises(ConfigError):
        build_config({"detectors": {NAME: {"window": 100_000}}})
    config = build_config({"detectors": {NAME: {"threshold": 6}}})
    assert config.detector_settings(NAME).threshold == 6


def test_presets_order_their_thresholds():
    conservative = build_config({}, preset="conservative").detector_settings(NAME)
    balanced = build_config({}, preset="balanced").detector_settings(NAME)
    aggressive = build_config({}, preset="aggressive").detector_settings(NAME)
    # Aggressive looks further back for the same three; conservative needs four.
    assert conservative.threshold > balanced.threshold == aggressive.threshold
    assert aggressive.span > balanced.span and conservative.in_a_row > balanced.in_a_row > aggressive.in_a_row
    assert conservative.empty_threshold > balanced.empty_threshold > aggressive.empty_threshold


def test_the_same_answer_to_different_questions_with_nothing_edited_warns():
    s = Stream()
    answer = "ea8da15 Add EGL robustness support and reset-notification strategy to the GL context"
    for spelling in ["-5", "--all", "-3 --follow x.cpp", "--grep=EGL"]:
        s.call("exec", answer, command=f"git log --oneline {spelling}")
    _, found = run(s)
    assert by(found, NAME) and "same answer" in by(found, NAME)[0].message


def test_the_same_answer_after_each_edit_is_the_work():
    s = Stream()
    for i in range(6):
        s.call("Edit", "The file src/p.py has been updated successfully.", file_path="src/p.py", old=f"a{i}")
        s.call(
            "Bash", "........................................\n40 passed in 0.52s", command=f"pytest -q # {i}"
        )
    _, found = run(s)
    assert not by(found, NAME)


def _web_search(query: str, links: str = "") -> str:
    """A result shaped as Claude Code's WebSearch writes it (tests/corpus,
    Damon-Salvetore/claude-code b700b6d7): the query quoted back, then its links."""
    found = f"Links: {links}\n\n" if links else ""
    return (
        f'Web search results for query: "{query}"\n\n{found}'
        "I'll perform that web search for you right away.\n\n\n"
        "REMINDER: You MUST include the sources above in your response to the user using markdown hyperlinks."
    )


def test_a_search_tool_answering_every_query_with_the_same_words_warns():
    """Six searches reworded, each answered with no links: only the query each result
    quotes back differs, so every round ended in the same answer."""
    s = Stream()
    for query in (
        "model precision format bf16",
        "huggingface model card dtype",
        "model specifications weights format",
        "release blog post model details",
        "site:example.org model release",
    ):
        s.call("WebSearch", _web_search(query), query=query)
    _, found = run(s)
    hits = [d for d in by(found, NAME) if d.level >= Level.WARN]
    assert hits and 'query: "…"' in hits[0].message


def test_searches_that_each_find_links_are_different_answers():
    s = Stream()
    for n, query in enumerate(("bf16 format", "model card dtype", "weights format", "release notes", "blog")):
        s.call(
            "WebSearch",
            _web_search(query, f'[{{"title": "page {n}", "url": "https://e.org/{n}"}}]'),
            query=query,
        )
    _, found = run(s)
    assert not by(found, NAME)


def test_pages_whose_numbers_differ_are_different_answers():
    s = Stream()
    for page in range(6):
        lines = "\n".join(f"{page * 40 + k}: line of code number {page * 40 + k}" for k in range(5))
        s.call("Read", lines, file_path="a.py", offset=page * 40)
    _, found = run(s)
    assert not by(found, NAME)


def test_a_program_the_shell_cannot_find_stays_in_the_outcome():
    """`brew`, then `conda`, then `port`: three different programs missing, not one failure."""
    s = Stream()
    for program in ["brew", "conda", "port", "apt-get"]:
        s.call(
            "bash", f"/bin/bash: line 1: {program}: command not found", command=f"{program} install libffi"
        )
    _, found = run(s)
    assert not by(found, NAME)


# A harness's errors as system messages (aider's own errors: formats/aider.py).
# Unit tests, not scenarios: Claude Code and Codex logs have no system message
# to carry them (tests/test_formats_equivalence.py renders every scenario so).

NOT_FOUND = (
    "litellm.NotFoundError: NotFoundError: OpenAIException - Error code: 404 - Unknown model 'qwen2.5'"
)


def test_the_model_call_failing_after_every_prompt_warns():
    s = Stream()
    for prompt in [
        "Integrate Memgraph.",
        "why the error?",
        "try again",
        "use gpt-3.5 then",
        "what is wrong?",
    ]:
        s.say(prompt, role="user")
        s.say("Here is the plan: 1. add the client, 2. store the vectors, 3. query them.")
        s.say(NOT_FOUND, role="system")
    _, found = run(s)
    hits = by(found, NAME)
    assert hits and hits[0].count == 4


def test_harness_errors_between_work_that_gets_somewhere_stay_quiet():
    s = Stream()
    s.say("Add the endpoint.", role="user")
    for i in range(4):
        s.say("Model anthropic/claude-sonnet-4 has hit a token limit!", role="system")
        s.say(NOT_FOUND, role="system")
        s.call(
            "Edit",
            "The file api/routes.py has been updated successfully.",
            file_path="api/routes.py",
            old=f"v{i}",
        )
    _, found = run(s)
    assert not by(found, NAME)


def test_a_failure_that_names_no_cause_is_no_outcome():
    """A harness's "Error: ripgrep command failed: exit status 2" after different searches says that each
    failed, not why: no stale outcome is built from it (the same rule as the generic lines above)."""
    for text in ("Error: ripgrep command failed: exit status 2", "Error: exit code 1"):
        assert outcome_of(_result(text, error=True)) is None, text
    assert outcome_of(_result("ModuleNotFoundError: No module named 'pytz'", error=True)) is not None


def test_an_edit_the_tool_did_not_apply_is_a_refusal_keyed_by_what_it_names():
    """ "Your changes have NOT been applied" and "No exact match found" refuse an edit; the
    diagnostics the harness names by code are part of the refusal, the echoed edit is not."""
    from monitor.detect.analysis.outcomes import rejection

    def refused(error: str, echo: str) -> str:
        found = rejection(
            "Your proposed edit has introduced new syntax error(s).\n\nERRORS:\n"
            f"- {error}\n\nThis is how your edit would have looked if applied\n{echo}\n"
            "Your changes have NOT been applied. Please fix your edit command and try again."
        )
        assert found is not None and found.kind == REJECTED
        return found.key

    assert refused("E999 SyntaxError: unmatched ')'", "12: x = (1))") == refused(
        "E999 SyntaxError: unmatched ')'", "14: y = f(2))"
    )
    assert refused("E999 SyntaxError: unmatched ']'", "x") != refused("E999 SyntaxError: unmatched ')'", "x")
    missing = rejection("[No exact match found in /workspace/src/App.tsx for\n```\nconst a = 1;\n```\n]")
    assert missing is not None and missing.kind == REJECTED


def test_a_patch_whose_old_lines_are_not_in_the_file_is_the_same_refusal_each_time():
    """Codex's apply_patch answering "Failed to find expected lines" (no exit code, plain text)
    refused the edit; the lines it quotes are the agent's hunk echoed back, so two hunks refused
    this way are the same refusal, and a refusal for another cause is another."""
    head = (
        "apply_patch verification failed: Failed to find expected lines in /home/dev/app/src/EditPage.tsx:\n"
    )
    first = outcome_of(_result(head + '    <thead className="bg-gray-50">\n      <tr>', tool="shell"))
    second = outcome_of(
        _result(head + "      <td className=\"px-4 py-3\">\n        value={item.name || ''}", tool="shell")
    )
    assert first is not None and first.kind == REJECTED
    assert second is not None and first.key == second.key
    other = outcome_of(
        _result("apply_patch verification failed: invalid hunk at line 5, 'x' is not valid", tool="shell")
    )
    assert other is None or other.key != first.key


def test_the_same_message_again_after_answers_that_brought_nothing_new():
    """A person pasting the same complaint after each edit: the third copy warns; new results
    between the copies (the work moved) or a compaction (the harness re-posts the task) do not."""
    from tests.eventkit import Script

    complaint = "The images still stack in one column; I want rows of different widths, as in Photos."

    def session(between) -> list:
        script = Script()
        for round_ in range(3):
            between(script.user(complaint), round_)
        return by(script.run(only(NAME)), NAME)

    (hit,) = session(lambda s, r: s.call("edit", {"file": "App.js"}, "Applied edit to App.js"))
    assert hit.count == 3 and "same message" in hit.message
    assert session(lambda s, r: s.call("bash", {"command": "pytest"}, f"{r + 3} passed")) == []
    assert (
        session(lambda s, r: s.call("edit", {"file": "App.js"}, "Applied edit to App.js").compaction()) == []
    )


def test_an_answers_pattern_is_the_same_in_every_process():
    """The pattern is printed and stored: it must not depend on the process's
    string-hash seed (it did: ``hash()`` of the answer's text)."""
    import os
    import subprocess
    import sys

    code = (
        "from monitor.events import Event, Kind\n"
        "from monitor.detect.analysis.outcomes import answer_of\n"
        "e = Event(kind=Kind.TOOL_RESULT, session='s', ts=1.0, content='006da4c chore(release): 1.2.3 ' * 4)\n"
        "print(answer_of(e).key)\n"
    )
    keys = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        keys.add(done.stdout.strip())
    assert len(keys) == 1 and next(iter(keys)).startswith("A:"), keys


def test_quoted_errors_are_lines_that_name_an_error_and_its_cause():
    from monitor.detect.analysis.outcomes import quoted_errors

    text = (
        'still broken: Processing PDF URL 3\nBackend error: {"detail":"Method Not Allowed"}\n'
        "TypeError: Cannot read properties of undefined (reading 'map')\n"
        "Failed to compile\nError handling\n- error management\nfailed[file.name] = 'failed'\nError: 1"
    )
    assert quoted_errors(text) == {
        'backend error: {"detail":"method not allowed"}',
        "typeerror: cannot read properties of undefined (reading 'map')",
    }
    assert quoted_errors("please make the header blue and the footer smaller") == frozenset()


def test_a_complaint_answered_in_words_and_left_behind_is_cleared_up():
    """A complaint the agent answered in words alone, after which the person went on to
    something else (restate the question, restated, "C"), was cleared up: it does not
    count when the same words come back about the next question.  The same complaint
    straight after a reply in words, or after work, still counts."""
    complaint = "can you restate the question? it did not print properly."
    s = Stream()
    for answer in ("C", "B", "A"):
        s.say("**Recommended:** Option B - the safest default.\n\n| Option | Description |\n| A | ... |")
        s.say(complaint, role="user")
        s.say("Question: should the system allow it? **Recommended:** Option B.")
        s.say(answer, role="user")
        s.call("apply_patch", "Success. Updated the following files:\nM spec.md", input=f"+- answer {answer}")
    _, found = run(s)
    assert not by(found, NAME)

    again = Stream()
    for _ in range(3):  # restated in words each time, and the person still cannot read it
        again.say("**Recommended:** Option B - the safest default.")
        again.say(complaint, role="user")
    _, found = run(again)
    assert [d.count for d in by(found, NAME)] == [3]

    worked = Stream()
    for i in range(3):  # an edit after each complaint, then the person's next words, then the complaint
        worked.say(complaint, role="user")
        worked.call("apply_patch", "Success. Updated the following files:\nM ui.py", input=f"+- fix {i}")
        worked.say("Fixed the printing; here is the question again.")
        worked.say(f"here is more help: the table renders but the heading line {i} is missing", role="user")
        worked.say("Understood.")
    _, found = run(worked)
    assert by(found, NAME)


def test_one_name_looked_for_again_and_again_in_one_place_warns():
    """The same name grepped for in tests/ with small changes, each finding nothing
    (tests/corpus, vorflux sphinx-doc__sphinx-9711): it is not there; the fourth try warns."""
    s = Stream()
    for pattern in (
        "needs_extensions",
        "verify_needs_extensions\\|needs_extensions",
        "needs_extensions\\|verify_needs",
        "VersionRequirement\\|needs_extensions",
    ):
        s.call("bash", "", command=f'cd /code/sphinx && grep -rn "{pattern}" tests/ | head -30')
    _, found = run(s)
    hits = by(found, NAME)
    assert hits and "searches for 'needs_extensions' that found nothing" in hits[0].message


def test_one_name_looked_for_in_one_file_after_another_is_one_search_over_many():
    """``__file__`` looked for in migrate.py, makemigrations.py, … each "No matches found"
    (tests/corpus, vorflux django__django-11141): one search over many items."""
    s = Stream()
    for name in (
        "migrate.py",
        "makemigrations.py",
        "showmigrations.py",
        "squashmigrations.py",
        "sqlmigrate.py",
    ):
        s.call(
            "grep_search",
            "No matches found",
            pattern="__file__",
            dirPath="django/core/management/commands",
            glob=name,
        )
    _, found = run(s)
    assert not by(found, NAME)


def test_an_edit_refused_the_same_way_whatever_it_quotes_back_warns():
    """Edits refused "Found 4 matches of the string to replace…" then ``String: <the old
    text>`` (tests/corpus, TheLazyLemur/dotfiles-stow a9e9ef8a): each try adds more of the
    lines all the tests share, the refusal quotes the try back and stays the same."""
    s = Stream()
    tries = [
        "\t// the logger",
        "\t})).Return(mockResponse, nil)\n\t// the logger",
        "\texpectedURL := gatewayUrl",
    ]
    for old in tries:
        refusal = (
            "Found 4 matches of the string to replace, but replace_all is false. To replace all occurrences, "
            "set replace_all to true. To replace only one occurrence, please provide more context to uniquely "
            f"identify the instance.\nString: {old}"
        )
        s.call(
            "Edit",
            refusal,
            error=True,
            file_path="client_test.go",
            old_string=old,
            new_string=old + "\n\tx()",
        )
    _, found = run(s)
    assert by(found, NAME)


def test_one_edit_refused_again_and_again_warns_whatever_it_echoes():
    """SWE-agent's linter refuses an edit and shows how the file would have looked
    (tests/corpus, swe-agent-gpt4-acr django-10924, read stuck 12-14): the same edit, with
    its indentation changed and changed back, refused three times.  Its call key squashes
    the indentation, so the calls look like one; their results echo the tries, so they
    differ: neither an exact repeat nor, before this, a stale outcome."""
    s = Stream()
    for indent in ("    ", "", "    "):
        body = f"{indent}def formfield(self):\n{indent}    return 1"
        refusal = (
            "Your proposed edit has introduced new syntax error(s). Please understand the fixes and retry "
            "your edit commmand.\n\nERRORS:\n- E999 IndentationError: unexpected indent\n\n"
            "This is how your edit would have looked if applied\n"
            f"1711:{body}\n\nYour changes have not been applied."
        )
        s.call("edit", refusal, command=f"edit 1711:1718\n{body}\nend_of_edit")
    _, found = run(s)
    assert by(found, NAME)


def _check_again(other_failure: bool) -> Stream:
    """scikit-learn-13496 (read stuck, 28-115): `python3 -c "import numpy.distutils"` fails,
    setuptools and numpy are installed in one version after another, and the same check fails
    the same way each time, far apart; scikit-learn-14983 (read honest) re-runs its build
    between fixes that each meet a new error."""
    probe = 'python3 -c "import numpy.distutils; print(1)"'
    missing = "Traceback (most recent call last):\nModuleNotFoundError: No module named 'numpy.distutils'"
    s = Stream()
    for n, pin in enumerate(("setuptools<60", "setuptools<70", "numpy==1.26.4")):
        s.call("bash", missing, error=True, command=probe)
        for step in range(3):
            s.call("bash", f"Successfully installed {pin} ({step})", command=f"pip install '{pin}' # {step}")
            s.call("read_file", f"line {n}{step} of setup.py", path="setup.py", offset=n * 10 + step)
        if other_failure:
            met = ("Multiple top-level packages discovered", "no attribute 'ImpImporter'", "no Cython")[n]
            s.call(
                "bash", f"Traceback (most recent call last):\nError: {met}", error=True, command=f"make {n}"
            )
    s.call("bash", missing, error=True, command=probe)
    return s


def test_the_same_check_failing_the_same_way_after_each_fix_is_stale():
    """The same check failing the same way a third time, other work between and no other failure
    met since it first failed: the fixes changed nothing it shows. When each fix meets a new error
    in between, the agent is moving: left alone."""
    _, found = run(_check_again(other_failure=False))
    hits = by(found, NAME)
    assert hits and hits[0].level is Level.WARN and hits[0].count == 3
    _, found = run(_check_again(other_failure=True))
    assert not by(found, NAME)


def test_a_check_that_failed_before_the_request_is_what_it_asks_about():
    """coder-gpt4 matplotlib-25498 (read honest): the Reproducer's run shows the bug's error;
    the Programmer, handed the task (a user message), fixes twice and meets the same error
    twice. Far apart, only the rounds since the request count: two failed fixes, not three."""
    probe = "python reproduce.py"
    error = "Traceback (most recent call last):\nValueError: Invalid vmin or vmax"
    s = Stream()
    s.call("bash", error, error=True, command=probe)
    s.say("We're currently solving the following issue: the colorbar fails", role="user")
    for n in range(2):
        for step in range(3):
            s.call("read_file", f"line {n}{step} of colors.py", path="colors.py", offset=n * 10 + step)
        s.call("edit", "File updated.", path="colors.py", old_string=f"a{n}", new_string=f"b{n}")
        s.call("bash", error, error=True, command=probe)
    _, found = run(s)
    assert not by(found, NAME)


def test_searches_of_a_harness_tool_that_find_nothing_are_empty_searches():
    """Issue 31's held-out shape 2: SWE-agent's own `find_file`, called with a command line,
    answered "No matches found for ..." again and again, each for another name."""
    found = outcome_of(
        _result('No matches found for "x.py" in /repo', tool="find_file", command='find_file "x.py"')
    )
    assert found is not None and found.kind == EMPTY
    s = Stream()
    for term in (
        "data classes",
        "Kotlin constructors",
        "records",
        "sealed",
        "value class",
        "copy",
        "equals",
        "hash",
    ):
        s.call("find_file", f'No matches found for "{term}" in /repo', command=f'find_file "{term}"')
    _, detections = run(s)
    assert by(detections, NAME)


def test_misses_of_one_file_named_by_the_answer_are_misses_in_one_place():
    """SWE-agent's `search_file` searches the open file and says which in its answer
    (tests/corpus coder-gpt4 django-11964, read stuck 37-44): four different names missed
    in one file. The same four misses, each in another file, are exploring."""

    def misses(files: list[str]) -> Stream:
        s = Stream()
        for term, name in zip(
            ("def from_db_value", "def __get__", "def to_python", "class TextChoices"), files
        ):
            s.call(
                "search_file",
                f'No matches found for "{term}" in /repo/django/db/models/{name}',
                command=f'search_file "{term}"',
            )
        return s

    _, found = run(misses(["fields/__init__.py"] * 4))
    assert by(found, NAME)
    _, found = run(misses(["fields/__init__.py", "enums.py", "base.py", "query.py"]))
    assert not by(found, NAME)
