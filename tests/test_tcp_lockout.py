"""Strangers cannot lock TCP agents out (issue 32, item 10).

40 token-less clients in another process hold the pre-hello slots and
reconnect the moment they are closed; 50 agents with the token then
connect one after another over real TCP on 127.0.0.1: every one must be
welcomed.  Before, the 32 slots stayed full and none was.
"""

from __future__ import annotations

import subprocess
import sys

from tests.securitykit import until
from tests.socketkit import DEADLINE, RawClient, running_monitor

STRANGERS = """
import socket, sys, threading
host, port = sys.argv[1], int(sys.argv[2])
def hold():
    while True:
        try:
            s = socket.create_connection((host, port))
            while s.recv(65536):
                pass
            s.close()
        except OSError:
            pass
for _ in range(40):
    threading.Thread(target=hold, daemon=True).start()
print("holding", flush=True)
sys.stdin.read()
"""


async def test_reconnecting_strangers_do_not_keep_token_holders_out(tmp_path):
    async with running_monitor(tmp_path, listen="127.0.0.1:0", token="t0ken") as (_hub, server):
        host, port = server.tcp_address
        strangers = subprocess.Popen(
            [sys.executable, "-c", STRANGERS, host, str(port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        try:
            assert strangers.stdout.readline() == b"holding\n"
            await until(lambda: server.refused >= 40, "the strangers filling the slots and coming back")
            welcomed = 0
            for n in range(50):
                agent = await RawClient.tcp(host, port)
                await agent.send({"type": "hello", "token": "t0ken", "agent": "a", "session": f"tcp{n}"})
                try:
                    reply = await agent.read(lambda m: m.get("type") in ("welcome", "error"), DEADLINE)
                    welcomed += reply["type"] == "welcome"
                except ConnectionError:
                    pass
                await agent.close()
            assert welcomed == 50
        finally:
            strangers.kill()
            strangers.wait()
