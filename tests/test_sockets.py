"""The socket source against a real hub: real Unix and TCP sockets, hostile clients."""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import subprocess
import sys

import orjson
import pytest

from monitor.config import build_config
from monitor.sources.sockets import SocketChannel, SocketError, SocketServer, parse_listen
from tests.socketkit import RawClient, Updates, abort, running_monitor, short_socket_path, tool_loop

START = {"type": "session_start", "session": "s1", "agent": "raw", "pid": os.getpid()}


def count(session: str, n: int):
    """Predicate: the hub's snapshot of ``session`` has seen ``n`` events."""
    return lambda info: info.events >= n


# -- the socket file ----------------------------------------------------------------------


async def test_socket_is_private_and_removed_on_stop(tmp_path):
    """The socket is mode 0600 in a freshly made 0700 directory, and gone after stop()."""
    path = short_socket_path(tmp_path).parent / "sub" / "lw.sock"
    async with running_monitor(tmp_path, unix_path=path) as (_hub, server):
        assert stat.S_ISSOCK(path.lstat().st_mode)
        assert path.stat().st_mode & 0o777 == 0o600
        assert path.parent.stat().st_mode & 0o777 == 0o700
        assert server.unix_path == path
    assert not path.exists()


async def test_stale_socket_file_is_replaced(tmp_path):
    """A socket file nobody listens on (a crashed monitor's) is replaced."""
    path = short_socket_path(tmp_path)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nothing listens
    async with running_monitor(tmp_path, unix_path=path) as (_hub, _server):
        client = await RawClient.unix(path)
        await client.send({"type": "hello", "agent": "x"})
        assert (await client.read())["type"] == "welcome"
        await client.close()


async def test_live_socket_is_not_replaced(tmp_path):
    """A second monitor on the same path fails clearly and the first keeps working."""
    path = short_socket_path(tmp_path)
    async with running_monitor(tmp_path, unix_path=path) as (hub, _server):
        second = SocketServer(hub, build_config({}), unix_path=path)
        with pytest.raises(SocketError, match="already listening"):
            await second.start()
        client = await RawClient.unix(path)
        await client.send({"type": "hello"})
        assert (await client.read())["type"] == "welcome"
        await client.close()


async def test_regular_file_at_socket_path_is_never_replaced(tmp_path):
    """A regular file where the socket should go is left alone."""
    path = short_socket_path(tmp_path)
    path.write_text("precious")
    with pytest.raises(SocketError, match="not a socket"):
        async with running_monitor(tmp_path, unix_path=path):
            pass
    assert path.read_text() == "precious"


def test_parse_listen_defaults_host_to_localhost():
    """--listen accepts HOST:PORT, :PORT, PORT and [IPv6]:PORT; the host defaults to 127.0.0.1."""
    assert parse_listen("0.0.0.0:7000") == ("0.0.0.0", 7000)
    assert parse_listen(":7000") == ("127.0.0.1", 7000)
    assert parse_listen("7000") == ("127.0.0.1", 7000)
    assert parse_listen("[::1]:7000") == ("::1", 7000)
    with pytest.raises(SocketError):
        parse_listen("localhost:http")


# -- events in, detections out ----------------------------------------------------------------


async def test_events_reach_the_hub_and_detections_come_back(tmp_path):
    """Native events sent on a socket are detected by the hub, and the detection is pushed back."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        await client.send(START, *tool_loop("s1", 4))
        detection = await client.read(lambda m: m["type"] == "detection")
        assert detection["session"] == "s1"
        assert detection["level"] in ("warn", "critical", "terminate")
        assert detection["detector"] and detection["message"]
        assert detection["file"].startswith("socket:")  # the source names the connection
        info = await updates.session("s1", count("s1", 9))
        assert info.origin == "socket"
        assert isinstance(server.socket_channels["s1"], SocketChannel)
        await client.close()


async def test_session_defaults_to_the_hello_session(tmp_path):
    """Events without a session belong to the session named in the hello."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        await client.send(
            {"type": "hello", "agent": "a", "session": "from-hello"},
            {"type": "message", "role": "assistant", "content": "hi"},
        )
        info = await updates.session("from-hello", count("from-hello", 1))
        assert info.events == 1
        await client.close()


async def test_garbage_gets_error_replies_and_the_connection_stays_up(tmp_path):
    """Each malformed line gets an error naming its line; valid lines around it still count."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        await client.send(
            START,  # line 1
            b"this is not json\n",  # 2
            b"[1, 2, 3]\n",  # 3
            {"type": "tool_call", "session": "s1", "args": {}},  # 4: no name
            {"type": "launch_missiles", "session": "s1"},  # 5: unknown type
            b"\n",  # 6: blank, ignored
            {"type": "message", "session": "s1", "role": "assistant", "content": "still here"},  # 7
        )
        errors = [await client.read(lambda m: m["type"] == "error") for _ in range(4)]
        assert [e["line"] for e in errors] == [2, 3, 4, 5]
        assert "invalid JSON" in errors[0]["reason"]
        assert "expected a JSON object" in errors[1]["reason"]
        assert "tool_call.name" in errors[2]["reason"]
        assert "unknown type 'launch_missiles'" in errors[3]["reason"]
        info = await updates.session("s1", count("s1", 2))
        assert info.events == 2
        problem = await updates.problem(lambda p: p.line == 4)
        assert problem.source.startswith("socket:") and "tool_call.name" in problem.reason
        # Still up: a later line is processed and answered.
        await client.send(b"{oops\n")
        assert (await client.read(lambda m: m["type"] == "error"))["line"] == 8
        await client.close()


async def test_invalid_utf8_is_repaired_and_reported(tmp_path):
    """Bytes that are not UTF-8 are replaced; the event is kept and the repair is reported."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        await client.send(START, b'{"type":"message","session":"s1","role":"user","content":"caf\xe9"}\n')
        error = await client.read(lambda m: m["type"] == "error")
        assert error["line"] == 2 and "invalid UTF-8" in error["reason"]
        await updates.session("s1", count("s1", 2))
        await client.close()


async def test_oversized_line_is_skipped_with_an_error(tmp_path):
    """A line over the limit is dropped (not buffered), answered, and the stream goes on."""
    config = build_config({"sources": {"max_line_bytes": 4096}})
    async with running_monitor(tmp_path, config) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        huge = {"type": "message", "session": "s1", "role": "assistant", "content": "x" * 100_000}
        await client.send(START, huge, {"type": "compaction", "session": "s1"})
        error = await client.read(lambda m: m["type"] == "error")
        assert error["line"] == 2
        assert "exceeds the 4,096-byte limit" in error["reason"]
        info = await updates.session("s1", count("s1", 2))
        assert info.events == 2
        await client.close()


async def test_default_limit_is_one_megabyte(tmp_path):
    """With the default config a 1.5 MB line is refused and a 0.9 MB one accepted."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        big = {"type": "message", "session": "s1", "role": "assistant", "content": "y" * 900_000}
        huge = {"type": "message", "session": "s1", "role": "assistant", "content": "z" * 1_500_000}
        await client.send(START, big, huge)
        error = await client.read(lambda m: m["type"] == "error")
        assert error["line"] == 3 and "1,048,576-byte limit" in error["reason"]
        await updates.session("s1", count("s1", 2))
        await client.close()


async def test_disconnect_mid_line_keeps_every_complete_line(tmp_path):
    """A client that dies mid-line loses nothing complete; the fragment is reported."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        lines = b"".join(orjson.dumps(r) + b"\n" for r in [START, *tool_loop("s1", 2)])
        partial = orjson.dumps({"type": "message", "session": "s1", "role": "user", "content": "never fin"})
        await client.send(lines + partial[:30])
        abort(client)
        info = await updates.session("s1", count("s1", 5))
        assert info.events == 5
        problem = await updates.problem(lambda p: p.line == 6)
        assert "connection closed in the middle of this line" in problem.reason


async def test_client_that_exits_without_reading_loses_nothing(tmp_path):
    """An agent that sends a long loop and exits at once: pushes to it fail, yet every event counts."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        records = [START, *tool_loop("s1", 500)]
        payload = b"".join(orjson.dumps(r) + b"\n" for r in records)
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(server.unix_path))
        # Send everything, then close without reading a single reply: the
        # detections pushed back hit a closed peer while input is still queued.
        await asyncio.to_thread(sock.sendall, payload)
        sock.close()
        info = await updates.session("s1", count("s1", len(records)))
        assert info.events == len(records)
        assert not [p for p in updates.problems() if p.source.startswith("socket:")]


async def test_many_concurrent_connections_lose_nothing(tmp_path):
    """40 connections sending 50 events each: every event reaches the hub."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)

        async def agent(n: int) -> None:
            client = await RawClient.unix(server.unix_path)
            session = f"c{n}"
            records = [{"type": "session_start", "session": session, "agent": "many"}]
            records += [
                {"type": "message", "session": session, "role": "assistant", "content": f"step {i}"}
                for i in range(49)
            ]
            await client.send(*records)
            await client.close()

        await asyncio.gather(*(agent(n) for n in range(40)))
        for n in range(40):
            info = await updates.session(f"c{n}", count(f"c{n}", 50))
            assert info.events == 50


# -- limits -------------------------------------------------------------------------------------


async def test_connections_over_the_limit_are_refused(tmp_path):
    """Past max_connections a new client gets an error and is closed; the refusal is logged."""
    config = build_config({"sources": {"max_connections": 2}})
    async with running_monitor(tmp_path, config) as (hub, server):
        updates = Updates(hub)
        first, second = await RawClient.unix(server.unix_path), await RawClient.unix(server.unix_path)
        for client in (first, second):
            await client.send({"type": "hello"})
            await client.read(lambda m: m["type"] == "welcome")
        third = await RawClient.unix(server.unix_path)
        messages = await third.read_until_closed()
        assert messages and messages[0]["type"] == "error"
        assert "too many connections" in messages[0]["reason"]
        await updates.problem(lambda p: "too many connections" in p.reason)
        await first.close()
        await second.close()


async def test_idle_connection_is_closed(tmp_path):
    """A connection silent for the idle timeout is told why and closed."""
    config = build_config({"sources": {"idle_timeout_seconds": 0.2}})
    async with running_monitor(tmp_path, config) as (_hub, server):
        client = await RawClient.unix(server.unix_path)
        await client.send(START)
        messages = await client.read_until_closed()
        assert any(m["type"] == "error" and "idle" in m["reason"] for m in messages)


# -- TCP and tokens -------------------------------------------------------------------------------


def test_tcp_without_a_token_does_not_start(tmp_path, monkeypatch):
    """--listen without --token or LOOPWATCH_TOKEN is a clear error, not an open port."""
    monkeypatch.delenv("LOOPWATCH_TOKEN", raising=False)
    with pytest.raises(SocketError, match="needs a token"):
        SocketServer(object(), build_config({}), unix_path=short_socket_path(tmp_path), listen="127.0.0.1:0")


async def test_tcp_refuses_clients_without_a_valid_token(tmp_path):
    """No hello, a wrong token or no token: error line, connection closed, problem logged."""
    async with running_monitor(tmp_path, listen="127.0.0.1:0", token="s3cret") as (hub, server):
        updates = Updates(hub)
        host, port = server.tcp_address
        attempts = [
            [START],  # no hello at all
            [{"type": "hello", "token": "wrong"}, START],  # wrong token
            [{"type": "hello", "agent": "no token"}, START],  # token missing
        ]
        for records in attempts:
            client = await RawClient.tcp(host, port)
            await client.send(*records)
            messages = await client.read_until_closed()
            assert messages[0]["type"] == "error" and messages[0]["line"] == 1
            assert messages[0]["reason"].startswith("connection refused")
            assert not any(m["type"] == "welcome" for m in messages)
        refusals = [p for p in updates.problems() if "connection refused" in p.reason]
        await updates.problem(lambda p: "invalid token" in p.reason)
        assert server.refused == 3
        assert hub.session("s1") is None  # nothing from refused clients got in
        assert all("s3cret" not in p.reason for p in refusals)


async def test_tcp_accepts_the_right_token_from_the_environment(tmp_path, monkeypatch):
    """A hello with the token from LOOPWATCH_TOKEN is welcomed and its events processed."""
    monkeypatch.setenv("LOOPWATCH_TOKEN", "from-env")
    async with running_monitor(tmp_path, listen="127.0.0.1:0") as (hub, server):
        updates = Updates(hub)
        client = await RawClient.tcp(*server.tcp_address)
        await client.send({"type": "hello", "token": "from-env"}, START, *tool_loop("s1", 4))
        assert (await client.read())["type"] == "welcome"
        await client.read(lambda m: m["type"] == "detection")
        info = await updates.session("s1", count("s1", 9))
        assert info.events == 9
        await client.close()


async def test_tcp_client_must_authenticate_in_time(tmp_path):
    """A TCP client that never says hello is dropped (bounded by the idle timeout)."""
    config = build_config({"sources": {"idle_timeout_seconds": 0.2}})
    async with running_monitor(tmp_path, config, listen="127.0.0.1:0", token="t") as (_hub, server):
        client = await RawClient.tcp(*server.tcp_address)
        messages = await client.read_until_closed()
        assert "connection refused: no hello with a valid token" in messages[-1]["reason"]
        assert server.refused == 1


# -- control out ----------------------------------------------------------------------------------


async def test_inject_reaches_the_agents_connection(tmp_path):
    """hub.act('inject') goes out on the session's connection and is recorded as delivered."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        await client.send(START)
        await updates.session("s1")
        action = await hub.act("inject", "s1", text="Try a different approach.")
        message = await client.read(lambda m: m["type"] == "inject")
        assert message["session"] == "s1" and message["text"] == "Try a different approach."
        assert action.outcome == "delivered"
        await client.close()


async def test_channel_of_a_closed_connection_fails_cleanly(tmp_path):
    """Sending to a session whose agent hung up fails with a reason, never raises."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        client = await RawClient.unix(server.unix_path)
        await client.send(START)
        await updates.session("s1")
        channel = server.socket_channels["s1"]
        await client.close()
        # The server notices the hang-up when its read returns EOF.
        async with asyncio.timeout(20):
            while "s1" in server.socket_channels:
                await asyncio.sleep(0.005)
        outcome = await channel.send({"type": "inject", "session": "s1", "text": "x"})
        assert outcome.status == "failed" and "closed" in outcome.detail


async def test_reconnected_agent_rebinds_its_sessions_with_hello(tmp_path):
    """After a reconnect, a hello listing the sessions makes the new connection their channel."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        old = await RawClient.unix(server.unix_path)
        await old.send(START)
        await updates.session("s1")
        await old.close()
        new = await RawClient.unix(server.unix_path)
        await new.send({"type": "hello", "agent": "raw", "sessions": ["s1"]})
        await new.read(lambda m: m["type"] == "welcome")
        action = await hub.act("inject", "s1", text="back again?")
        assert (await new.read(lambda m: m["type"] == "inject"))["text"] == "back again?"
        assert action.outcome == "delivered"
        await new.close()


async def test_hook_poll_collects_queued_messages(tmp_path):
    """A hook session's inject is queued, then handed to the next hook call's poll."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        hook = await RawClient.unix(server.unix_path)
        start = {"type": "session_start", "session": "h1", "agent": "claude"}
        await hook.send(start, {"type": "poll", "session": "h1"})
        done = await hook.read(lambda m: m["type"] == "poll_done")
        assert done == {"type": "poll_done", "session": "h1"}
        assert not any(m["type"] == "inject" for m in hook.received)
        await hook.close()
        await updates.session("h1")

        action = await hub.act("inject", "h1", text="stop repeating yourself")
        assert action.outcome == "delivered"
        assert action.detail == "queued for the agent's next hook call"

        nxt = await RawClient.unix(server.unix_path)
        await nxt.send(
            {"type": "hello", "origin": "hook"},
            {"type": "message", "session": "h1", "role": "assistant", "content": "ok"},
            {"type": "poll", "session": "h1"},
        )
        await nxt.read(lambda m: m["type"] == "poll_done")
        injects = [m for m in nxt.received if m["type"] == "inject"]
        assert [m["text"] for m in injects] == ["stop repeating yourself"]
        # Drained: the following poll is empty.
        await nxt.send({"type": "poll", "session": "h1"})
        nxt.received.clear()
        await nxt.read(lambda m: m["type"] == "poll_done")
        assert not any(m["type"] == "inject" for m in nxt.received)
        await nxt.close()


async def test_poll_without_a_session_is_an_error(tmp_path):
    """A poll must name its session; the reply says so and the connection stays."""
    async with running_monitor(tmp_path) as (_hub, server):
        client = await RawClient.unix(server.unix_path)
        await client.send({"type": "poll"}, {"type": "hello"})
        error = await client.read(lambda m: m["type"] == "error")
        assert "poll.session" in error["reason"]
        await client.read(lambda m: m["type"] == "welcome")
        await client.close()


async def test_hook_poll_returns_the_automatic_nudge_for_its_own_events(tmp_path):
    """With auto_inject on, a hook whose events complete a loop gets the nudge in the same poll."""
    config = build_config({"control": {"auto_inject": True}})
    async with running_monitor(tmp_path, config) as (_hub, server):
        hook = await RawClient.unix(server.unix_path)
        await hook.send(
            {"type": "hello", "origin": "hook"},
            {"type": "session_start", "session": "h2", "agent": "claude"},
            *tool_loop("h2", 4),
            {"type": "poll", "session": "h2"},
        )
        await hook.read(lambda m: m["type"] == "poll_done")
        injects = [m for m in hook.received if m["type"] == "inject"]
        assert injects and injects[0]["session"] == "h2"
        assert injects[0]["text"].startswith("[loopwatch]")
        await hook.close()


# -- which pids may be killed later ---------------------------------------------------------------

SEND_START = (
    "import json, socket, sys\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.connect(sys.argv[1])\n"
    "s.sendall(json.dumps({'type': 'session_start', 'session': sys.argv[2], 'pid': int(sys.argv[3])}).encode() + b'\\n')\n"
    "s.close()\n"
)


async def run_sender(path, session: str, pid: int) -> None:
    """A separate process connects and reports ``pid`` for ``session``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", SEND_START, str(path), session, str(pid)
    )
    assert await proc.wait() == 0


async def test_pid_of_a_wrapper_is_trusted(tmp_path):
    """A hook-like client may report its parent's pid (the agent it runs under): kept for kills."""
    async with running_monitor(tmp_path) as (hub, server):
        updates = Updates(hub)
        await run_sender(server.unix_path, "wrapped", os.getpid())  # the sender's parent
        info = await updates.session("wrapped")
        assert info.pid == os.getpid()


async def test_unrelated_pid_is_not_used_for_kills(tmp_path):
    """A pid that is neither the client, its ancestor nor its child is kept only as meta, and reported."""
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        async with running_monitor(tmp_path) as (hub, server):
            updates = Updates(hub)
            await run_sender(server.unix_path, "liar", bystander.pid)  # a sibling of the sender
            info = await updates.session("liar")
            assert info.pid is None
            problem = await updates.problem(lambda p: "will not be used to stop this session" in p.reason)
            assert f"pid {bystander.pid} is not the connecting process" in problem.reason
            action = await hub.act("kill", "liar")
            assert action.outcome != "delivered"
            assert action.detail.startswith("no process id is known for this session")
        assert bystander.poll() is None  # untouched
    finally:
        bystander.kill()
        bystander.wait()


async def test_pid_from_a_tcp_client_is_never_a_local_process(tmp_path):
    """Over TCP a reported pid belongs to another machine: it becomes meta.remote_pid."""
    async with running_monitor(tmp_path, listen="127.0.0.1:0", token="t") as (hub, server):
        updates = Updates(hub)
        client = await RawClient.tcp(*server.tcp_address)
        await client.send({"type": "hello", "token": "t"}, START)
        info = await updates.session("s1")
        assert info.pid is None
        assert hub.describe_kill("s1").startswith("no process id is known")
        await client.close()
