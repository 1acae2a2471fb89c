"""``loopwatch eval`` on small hand-written label files and runs in ``tmp_path``.

Real parts: real logs written to disk (native JSONL, a chat document, a
gzipped log), real label files, the real command line in process (its
output and exit codes) and the real scan it drives.

The looping run: ``loop_lines("s1", 8)``, 16 lines of the same failing
``ls``: its first warn is at line 5, its first terminate at line 10.  The
honest run: 16 lines of different, successful commands; never warns.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tomllib
from pathlib import Path

import orjson
import pytest

from monitor.cli import main
from monitor.labels import LabelError, load_labels, split_for
from tests.test_watch_headless import loop_lines

FIRST_WARN, FIRST_TERMINATE = 5, 10


@pytest.fixture(autouse=True)
def _no_user_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOOPWATCH_CONFIG_DIR", str(tmp_path / "config"))


def _honest_lines(session: str, n: int = 8) -> str:
    out = []
    for i in range(n):
        call = {"type": "tool_call", "session": session, "id": f"h{i}", "name": "bash"}
        out.append(json.dumps({**call, "args": {"cmd": f"cat part{i}.txt"}}))
        result = {"type": "tool_result", "session": session, "id": f"h{i}", "content": f"part {i}: {i * 7}"}
        out.append(json.dumps(result))
    return "\n".join(out) + "\n"


def _name(split: str, stem: str, suffix: str = ".jsonl") -> str:
    """A run name (relative path) whose split_for is ``split``."""
    for i in range(100):
        name = f"runs/{stem}{i}{suffix}"
        if split_for(name) == split:
            return name
    raise AssertionError("no name found")


def _write_run(root: Path, name: str, text: str) -> str:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return name


def _labels(root: Path, runs: list[dict], sources: str = "") -> Path:
    source = sources or '[source.mine]\nagent = "native-agent"\nrepository = "here"\nlicence = "MIT"\n'
    body = [source]
    for run in runs:
        run = {"source": "mine", **run}
        fields = "\n".join(f"{key} = {json.dumps(value)}" for key, value in run.items())
        body.append(f"[[run]]\n{fields}\n")
    path = root / "labels.toml"
    path.write_text("\n".join(body))
    return path


def _eval(capsys: pytest.CaptureFixture[str], labels: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["eval", str(labels), "--jobs", "1", *extra])
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys: pytest.CaptureFixture[str], labels: Path, *extra: str) -> dict:
    code, out, err = _eval(capsys, labels, "--json", *extra)
    assert code in (0, 1), err
    return orjson.loads(out)


def test_caught_late_missed_false_alarm_and_borderline(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    honest = _write_run(tmp_path, "runs/honest.jsonl", _honest_lines("s2"))
    runs = [
        {"path": loop, "label": "stuck", "episodes": [[3, 16]], "note": "caught"},
        {
            "path": _write_run(tmp_path, "runs/late.jsonl", loop_lines("s3", 8)),
            "label": "stuck",
            "episodes": [[1, 4]],
        },
        {
            "path": _write_run(tmp_path, "runs/quiet.jsonl", _honest_lines("s4")),
            "label": "stuck",
            "episodes": [[2, 6]],
        },
        {"path": _write_run(tmp_path, "runs/alarm.jsonl", loop_lines("s5", 8)), "label": "honest"},
        {"path": honest, "label": "honest"},
        {"path": _write_run(tmp_path, "runs/border.jsonl", loop_lines("s6", 8)), "label": "borderline"},
    ]
    report = _json(capsys, _labels(tmp_path, runs))
    warn = report["levels"]["warn"]["total"]
    assert {k: warn[k] for k in ("episodes", "caught", "late", "missed", "honest", "false_alarms")} == {
        "episodes": 3,
        "caught": 1,
        "late": 1,
        "missed": 1,
        "honest": 2,
        "false_alarms": 1,
    }
    assert warn["rates"]["caught"] == pytest.approx(1 / 3) and warn["rates"]["false_alarms"] == 0.5
    assert list(report["levels"]["warn"]["agents"]) == ["native-agent"]
    findings = {(f["level"], f["kind"], f["path"]): f for f in report["findings"]}
    late = findings["warn", "late", "runs/late.jsonl"]
    assert late["episode"] == [1, 4] and late["first_warning"]["line"] == FIRST_WARN
    assert findings["warn", "missed", "runs/quiet.jsonl"]["first_warning"] is None
    alarm = findings["warn", "false_alarm", "runs/alarm.jsonl"]["first_warning"]
    assert alarm == {"detector": "exact_repeat", "line": FIRST_WARN, "level": "warn"}
    assert report["borderline"] == [
        {"path": "runs/border.jsonl", "agent": "native-agent", "first_warning": alarm}
    ]
    terminate = report["levels"]["terminate"]["total"]
    assert (terminate["caught"], terminate["late"], terminate["false_alarms"]) == (1, 1, 1)
    detectors = report["levels"]["warn"]["detectors"]
    assert detectors == {"true": {"exact_repeat": 1}, "false": {"exact_repeat": 1}}


def test_the_text_report_lists_each_miss_and_false_alarm(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    runs = [
        {
            "path": _write_run(tmp_path, "runs/quiet.jsonl", _honest_lines("s1")),
            "label": "stuck",
            "episodes": [[2, 6]],
        },
        {"path": _write_run(tmp_path, "runs/alarm.jsonl", loop_lines("s2", 8)), "label": "honest"},
    ]
    code, out, _ = _eval(capsys, _labels(tmp_path, runs))
    assert code == 0
    assert "  missed      runs/quiet.jsonl episode 2-6: none" in out
    assert f"  false_alarm runs/alarm.jsonl: exact_repeat at {FIRST_WARN} (warn)" in out
    assert "  native-agent" in out and "  total" in out


def test_a_warning_outside_the_episodes_of_a_stuck_run_is_counted(tmp_path: Path, capsys):
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    report = _json(capsys, _labels(tmp_path, [{"path": loop, "label": "stuck", "episodes": [[13, 16]]}]))
    total = report["levels"]["warn"]["total"]
    assert (total["caught"], total["stuck_runs"], total["outside"]) == (1, 1, 1)


def test_two_episodes_late_only_before_the_next(tmp_path: Path, capsys):
    """A warning inside the second episode is not a late catch of the first."""
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    report = _json(
        capsys, _labels(tmp_path, [{"path": loop, "label": "stuck", "episodes": [[1, 2], [3, 16]]}])
    )
    total = report["levels"]["warn"]["total"]
    assert (total["caught"], total["late"], total["missed"]) == (1, 0, 1)


@pytest.mark.parametrize(
    ("episodes", "message"),
    [
        ([[10, 17]], "runs/loop.jsonl: episode [10, 17] does not exist: the run ends at 16"),
        ([[12, 3]], "episode [12, 3] does not exist (1 <= first <= last)"),
        ([[0, 3]], "episode [0, 3] does not exist"),
    ],
)
def test_an_episode_that_is_not_in_its_run_is_refused(tmp_path: Path, capsys, episodes, message):
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    code, out, err = _eval(
        capsys, _labels(tmp_path, [{"path": loop, "label": "stuck", "episodes": episodes}])
    )
    assert code == 2 and out == ""
    assert err.startswith("loopwatch: eval: ") and message in err and "Traceback" not in err


def test_a_document_s_unit_is_its_step(tmp_path: Path, capsys):
    """A chat document counts messages: an episode past its last message is refused."""
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "fix it"}]
    for _ in range(6):
        messages.append({"role": "assistant", "content": "THOUGHT: look\n```bash\nls /nonexistent\n```"})
        messages.append(
            {"role": "user", "content": "<returncode>2</returncode><output>no such file</output>"}
        )
    doc = tmp_path / "runs" / "doc.traj.json"
    doc.parent.mkdir()
    doc.write_text(json.dumps({"messages": messages}))
    labels = _labels(tmp_path, [{"path": "runs/doc.traj.json", "label": "stuck", "episodes": [[3, 15]]}])
    code, _, err = _eval(capsys, labels)
    assert code == 2 and "the run ends at 14" in err
    labels = _labels(tmp_path, [{"path": "runs/doc.traj.json", "label": "stuck", "episodes": [[3, 14]]}])
    assert _eval(capsys, labels)[0] == 0


@pytest.mark.parametrize(
    ("run", "message"),
    [
        ({"path": "runs/nowhere.jsonl", "label": "honest"}, "no such file"),
        ({"path": "runs/loop.jsonl", "label": "stuck"}, "a stuck run needs episodes"),
        ({"path": "runs/loop.jsonl", "label": "stuk"}, "label must be one of stuck, honest, borderline"),
        (
            {"path": "runs/loop.jsonl", "label": "honest", "episodes": [[1, 2]]},
            "episodes are for stuck runs only",
        ),
        ({"path": "runs/loop.jsonl", "label": "honest", "spilt": "dev"}, "unknown key(s) spilt"),
        ({"path": "runs/loop.jsonl", "label": "honest", "source": "theirs"}, "source 'theirs' is not"),
        ({"path": "runs/loop.jsonl", "label": "honest", "picked": "longest"}, "picked must be random or"),
    ],
)
def test_a_bad_label_file_exits_2_with_its_reason(tmp_path: Path, capsys, run: dict, message: str):
    _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    code, out, err = _eval(capsys, _labels(tmp_path, [run]))
    assert code == 2 and out == "" and message in err, err
    assert str(tmp_path / "labels.toml") in err and len(err.splitlines()) == 1


def test_a_stated_split_that_its_path_does_not_give_is_refused(tmp_path: Path, capsys):
    name = _write_run(tmp_path, _name("dev", "run"), loop_lines("s1", 8))
    code, _, err = _eval(
        capsys, _labels(tmp_path, [{"path": name, "label": "honest", "split": "validation"}])
    )
    assert code == 2 and "split is 'validation' but its path puts it in 'dev'" in err
    (tmp_path / "labels.toml").write_text("[[run]\npath = 1")
    code, _, err = _eval(capsys, tmp_path / "labels.toml")
    assert code == 2 and "not valid TOML" in err


def test_a_run_no_format_reads_is_unreadable_not_a_crash(tmp_path: Path, capsys):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "blob.jsonl").write_bytes(bytes(range(256)) * 8)
    (tmp_path / "runs" / "other.json").write_text('{"totally": "unrelated"}')
    packed = tmp_path / "runs" / "cut.jsonl.gz"
    packed.write_bytes(gzip.compress(loop_lines("s9", 8).encode())[:12])
    runs = [
        {"path": "runs/blob.jsonl", "label": "honest"},
        {"path": "runs/other.json", "label": "honest"},
        {"path": "runs/cut.jsonl.gz", "label": "stuck", "episodes": [[1, 999]]},  # no range check: unread
        {"path": _write_run(tmp_path, "runs/honest.jsonl", _honest_lines("s2")), "label": "honest"},
    ]
    report = _json(capsys, _labels(tmp_path, runs), "--require", "unreadable<=0.5")
    assert [u["path"] for u in report["unreadable"]] == [
        "runs/blob.jsonl",
        "runs/other.json",
        "runs/cut.jsonl.gz",
    ]
    assert "truncated gzip data" in report["unreadable"][2]["reason"]
    assert report["levels"]["warn"]["total"]["honest"] == 1
    assert report["requirements"] == [{"spec": "unreadable<=0.5", "met": False, "value": 0.75}]


def test_require_exit_codes(tmp_path: Path, capsys):
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    honest = _write_run(tmp_path, "runs/honest.jsonl", _honest_lines("s2"))
    labels = _labels(
        tmp_path,
        [{"path": loop, "label": "stuck", "episodes": [[3, 16]]}, {"path": honest, "label": "honest"}],
    )
    assert _eval(capsys, labels, "--require", "caught>=0.85", "--require", "false_alarms<=0.05")[0] == 0
    code, out, _ = _eval(capsys, labels, "--require", "caught>=0.85", "--require", "terminate_caught<0.5")
    assert code == 1
    assert "require caught>=0.85: 1.000: met" in out and "require terminate_caught<0.5: 1.000: NOT MET" in out
    for bad in ("caught", "cought>=1", "caught>=lots"):
        code, _, err = _eval(capsys, labels, "--require", bad)
        assert code == 2 and err.startswith("loopwatch: --require: "), err


def test_a_metric_with_nothing_to_measure_is_not_met(tmp_path: Path, capsys):
    honest = _write_run(tmp_path, "runs/honest.jsonl", _honest_lines("s2"))
    code, out, _ = _eval(
        capsys, _labels(tmp_path, [{"path": honest, "label": "honest"}]), "--require", "caught>=0.5"
    )
    assert code == 1 and "cannot be measured" in out


def test_split_selects_the_runs_scored(tmp_path: Path, capsys):
    dev = _write_run(tmp_path, _name("dev", "loop"), loop_lines("s1", 8))
    validation = _write_run(tmp_path, _name("validation", "honest"), _honest_lines("s2"))
    labels = _labels(
        tmp_path,
        [
            {"path": dev, "label": "stuck", "episodes": [[3, 16]], "split": "dev"},
            {"path": validation, "label": "honest"},  # the split may be left out: it is computed
        ],
    )
    only_dev = _json(capsys, labels, "--split", "dev")["levels"]["warn"]["total"]
    only_validation = _json(capsys, labels, "--split", "validation")["levels"]["warn"]["total"]
    both = _json(capsys, labels, "--split", "all", "--jobs", "2")["levels"]["warn"]["total"]
    assert (only_dev["episodes"], only_dev["honest"]) == (1, 0)
    assert (only_validation["episodes"], only_validation["honest"]) == (0, 1)
    assert (both["episodes"], both["honest"], both["caught"]) == (1, 1, 1)
    assert [run.split for run in load_labels(labels).runs] == ["dev", "validation"]


def test_the_json_is_one_object_with_every_part(tmp_path: Path, capsys):
    loop = _write_run(tmp_path, "runs/loop.jsonl.gz", "")
    (tmp_path / loop).write_bytes(gzip.compress(loop_lines("s1", 8).encode()))  # compressed runs read as any
    code, out, _ = _eval(
        capsys,
        _labels(tmp_path, [{"path": loop, "label": "stuck", "episodes": [[3, 16]]}]),
        "--json",
        "--preset",
        "aggressive",
    )
    assert code == 0 and len(out.splitlines()) == 1
    report = orjson.loads(out)
    assert set(report) == {
        "labels", "split", "preset", "config", "runs", "sources", "levels",
        "findings", "borderline", "unreadable", "requirements",
    }  # fmt: skip
    assert report["preset"] == "aggressive" and report["runs"] == 1
    assert report["sources"]["mine"]["agent"] == "native-agent"
    assert set(report["levels"]) == {"warn", "terminate"}
    assert set(report["levels"]["warn"]) == {"total", "agents", "detectors"}
    assert report["levels"]["warn"]["total"]["caught"] == 1


def test_the_labels_of_issue_13_are_read_as_aliases(tmp_path: Path, capsys):
    _write_run(tmp_path, "mine/loop.jsonl", loop_lines("s1", 8))
    labels = tmp_path / "labels.toml"
    labels.write_text(
        '[source.mine]\nagent = "native-agent"\n\n'
        '[[run]]\npath = "mine/loop.jsonl"\nlabel = "loop"\nloops = [[3, 16]]\nnote = "old shape"\n'
    )
    (run,) = load_labels(labels).runs
    assert (run.label, run.episodes, run.source, run.agent, run.picked) == (
        "stuck",
        ((3, 16),),
        "mine",
        "native-agent",
        "random",
    )
    assert _json(capsys, labels)["levels"]["warn"]["total"]["caught"] == 1


def test_a_label_file_of_ones_own_runs_needs_no_sources(tmp_path: Path, capsys):
    loop = _write_run(tmp_path, "loop.jsonl", loop_lines("s1", 8))
    labels = tmp_path / "labels.toml"
    labels.write_text(
        f'[[run]]\npath = "{loop}"\nagent = "my-agent"\nlabel = "stuck"\nepisodes = [[3, 16]]\n'
    )
    assert list(_json(capsys, labels)["levels"]["warn"]["agents"]) == ["my-agent"]


def test_write_expected_and_assign_split(tmp_path: Path, capsys):
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    honest = _write_run(tmp_path, "runs/honest.jsonl", _honest_lines("s2"))
    labels = _labels(
        tmp_path,
        [{"path": loop, "label": "stuck", "episodes": [[3, 16]]}, {"path": honest, "label": "honest"}],
    )
    expected = tmp_path / "expected.toml"
    assert _eval(capsys, labels, "--write-expected", str(expected))[0] == 0
    data = tomllib.loads(expected.read_text())
    assert data == {
        "splits": ["dev", "validation"],
        "caught": ["runs/loop.jsonl@3-16"],
        "unreadable": [],
        "quiet": ["runs/honest.jsonl"],
    }
    assert main(["eval", "--assign-split", "a/b.traj", "../fixtures/x.json"]) == 0
    out = capsys.readouterr().out
    assert (
        out == f"{split_for('a/b.traj')}\ta/b.traj\n{split_for('../fixtures/x.json')}\t../fixtures/x.json\n"
    )


def test_split_for_is_the_sha256_of_the_path_modulo_3():
    for path in ("a.jsonl", "swe-agent-gpt4o/django__django-11099.traj.gz", "../fixtures/x.json"):
        number = int(hashlib.sha256(path.encode()).hexdigest(), 16)
        assert split_for(path) == ("validation" if number % 3 == 0 else "dev")
    with pytest.raises(LabelError):
        load_labels(Path("/nonexistent/labels.toml"))


def test_another_detectors_detections_are_scored_instead(tmp_path: Path, capsys):
    """--detections: a peer's (or an older run's) detections, in scan --json's shape, are scored on the
    same labels; lines outside every episode of a stuck run, and honest runs warned, count as usual."""
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    honest = _write_run(tmp_path, "runs/honest.jsonl", _honest_lines("s2"))
    labels = _labels(
        tmp_path,
        [{"path": loop, "label": "stuck", "episodes": [[3, 16]]}, {"path": honest, "label": "honest"}],
    )
    found = tmp_path / "peer.jsonl"
    rows = [
        {"file": str(tmp_path / loop), "line": 9, "session": "s1", "detector": "peer", "level": "warn"},
        {"file": str(tmp_path / honest), "line": 2, "session": "s2", "detector": "peer", "level": "notice"},
    ]
    found.write_text("".join(json.dumps(row) + "\n" for row in rows))
    total = _json(capsys, labels, "--detections", str(found))["levels"]["warn"]["total"]
    assert (total["caught"], total["false_alarms"]) == (1, 0)  # a notice is no warning
    found.write_text(json.dumps(rows[0] | {"file": str(tmp_path / honest)}) + "\n")
    total = _json(capsys, labels, "--detections", str(found))["levels"]["warn"]["total"]
    assert (total["caught"], total["false_alarms"]) == (0, 1)
    found.write_text("not json\n")
    code, _, err = _eval(capsys, labels, "--detections", str(found))
    assert code == 2 and "peer.jsonl:1: not a detection" in err


def test_unlabelled_runs_are_left_out_and_tuned_runs_are_development_data(tmp_path: Path, capsys):
    loop = _write_run(tmp_path, "runs/loop.jsonl", loop_lines("s1", 8))
    other = _write_run(tmp_path, "runs/other.jsonl", _honest_lines("s3"))
    tuned_split = "dev"
    labels = _labels(
        tmp_path,
        [
            {"path": loop, "label": "stuck", "episodes": [[3, 16]], "tuned": True, "split": tuned_split},
            {"path": other, "label": "unlabelled"},
        ],
    )
    result = _json(capsys, labels)
    assert result["levels"]["warn"]["total"]["episodes"] == 1
    labels.write_text(labels.read_text().replace('split = "dev"', 'split = "validation"'))
    code, _, err = _eval(capsys, labels)
    assert code == 2 and "a tuned run is development data" in err


def test_a_harness_failure_pattern_counts_once(tmp_path: Path, capsys):
    """Runs that repeat one harness failure (the same `pattern`) are one episode in the totals, with the
    outcome most of them had; a run without the pattern counts as before."""
    caught = _write_run(tmp_path, "runs/a.jsonl", loop_lines("s1", 8))
    also = _write_run(tmp_path, "runs/b.jsonl", loop_lines("s2", 8))
    quiet = _write_run(tmp_path, "runs/c.jsonl", _honest_lines("s3", 20))
    runs = [
        {"path": caught, "label": "stuck", "episodes": [[3, 16]], "pattern": "same rejection"},
        {"path": also, "label": "stuck", "episodes": [[3, 16]], "pattern": "same rejection"},
        {"path": quiet, "label": "stuck", "episodes": [[3, 16]], "pattern": "same rejection"},
    ]
    total = _json(capsys, _labels(tmp_path, runs))["levels"]["warn"]["total"]
    assert (total["episodes"], total["caught"], total["missed"]) == (1, 1, 0)
    runs[2].pop("pattern")
    total = _json(capsys, _labels(tmp_path, runs))["levels"]["warn"]["total"]
    assert (total["episodes"], total["caught"], total["missed"]) == (2, 1, 1)


def test_assign_split_takes_a_path_typed_from_anywhere_and_the_split_written(capsys):
    """A run's path as typed from the repository root gets the split its label says, not the hash of the
    typed text (which named another part for a third of the runs)."""
    from monitor.cli import main
    from monitor.labels import load_labels

    labels = Path(__file__).parent / "corpus" / "labels.toml"
    runs = [run for run in load_labels(labels).runs if run.file.exists()][:30]
    typed = [
        str(run.file.relative_to(Path.cwd())) if run.file.is_relative_to(Path.cwd()) else str(run.file)
        for run in runs
    ]
    assert main(["eval", str(labels), "--assign-split", *typed]) == 0
    printed = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert printed == [run.split for run in runs]
