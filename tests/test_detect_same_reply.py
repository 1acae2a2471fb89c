"""Same reply: the agent answers every new message with a near-copy of its last reply."""

from __future__ import annotations

from monitor.events import Level
from tests.eventkit import Script, by, only

REPLY = (
    "I see you've shown me the path {path}. To help, please share the actual contents of the file, "
    "or add it to the chat with /add so I can read it."
)


def run(script: Script, **settings):
    return by(script.run(only("same_reply", **settings)), "same_reply")


def pasted(paths: list[str], reply: str = REPLY) -> Script:
    s = Script()
    for path in paths:
        s.user(path)
        s.say(reply.format(path=path))
    return s


def test_the_same_reply_to_four_different_messages_warns():
    s = pasted([f"src/app/module_{n}.py" for n in range(4)])
    hits = run(s)
    assert len(hits) == 1 and hits[0].count == 4 and hits[0].level is Level.WARN
    assert hits[0].line == s.line  # the fourth reply


def test_three_are_below_the_threshold():
    assert run(pasted([f"src/m{n}.py" for n in range(3)])) == []


def test_the_same_question_again_is_answered_the_same_and_left_alone():
    """The person asks the same thing four times: the same answer is still the answer."""
    assert run(pasted(["src/app/main.py"] * 4)) == []


def test_replies_with_work_between_them_are_left_alone():
    s = Script()
    for n in range(5):
        s.user(f"src/app/module_{n}.py")
        s.call("read_file", {"path": f"src/app/module_{n}.py"}, f"contents {n}")
        s.say(REPLY.format(path=f"src/app/module_{n}.py"))
    assert run(s) == []


def test_replies_that_differ_are_a_conversation():
    s = Script()
    answers = (
        "The parser reads one token too far when a line ends in a backslash; that is the bug.",
        "Caching is safe here: every key includes the file's modification time and its size.",
        "Two CLI flags clash, --quiet and --verbose; I would make the last one given win.",
        "Of the 212 tests, 3 fail, all in test_io.py, and all on Windows path separators.",
        "The docs still describe the old config file name; README and docs/setup.md need it.",
    )
    for n, answer in enumerate(answers):
        s.user(f"Next question, number {n}.")
        s.say(answer)
    assert run(s) == []
