"""The NATS transport: frame parsing (split frames, large payloads), request/reply, errors, reconnect."""

from __future__ import annotations

import asyncio
import random
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import Proc, free_port

from foldstream import ConnectionLostError, NoRespondersError, RequestTimeoutError
from foldstream._transport import ConnectOptions, Connection, Msg, _Protocol


class NatsServer:
    """A plain nats-server (no JetStream) on a loopback port."""

    def __init__(self, binary: Path, port: int | None = None, args: list[str] | None = None) -> None:
        self.binary = binary
        self.port = port or free_port()
        self.args = args or []
        self.proc = Proc([str(binary), "-a", "127.0.0.1", "-p", str(self.port), *self.args], ready="Server is ready")

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture
def nats(nats_server_bin: Path) -> Iterator[NatsServer]:
    s = NatsServer(nats_server_bin)
    yield s
    s.stop()


def _frames() -> tuple[bytes, list[tuple[str, str, bytes, dict[str, str], str]]]:
    big = random.Random(1).randbytes(300_000)
    want = [
        ("a.b", "", b"hello", {}, ""),
        ("a.c", "_INBOX.x.1", b"", {}, ""),
        ("a.d", "r", b"with\r\ncrlf inside\r\n", {"Nats-Msg-Id": "s1:t1", "K": "v: w"}, ""),
        ("big", "", big, {}, ""),
        ("_INBOX.x.2", "", b"", {}, "503"),
    ]
    out = bytearray(b'INFO {"server_id":"x","max_payload":1048576}\r\nPING\r\n')
    for subject, reply, data, headers, status in want:
        r = f" {reply}" if reply else ""
        if headers or status:
            h = ("NATS/1.0" + (f" {status}" if status else "") + "\r\n"
                 + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode()
            out += f"HMSG {subject} 1{r} {len(h)} {len(h) + len(data)}\r\n".encode() + h + data + b"\r\n"
        else:
            out += f"MSG {subject} 1{r} {len(data)}\r\n".encode() + data + b"\r\n"
    out += b"+OK\r\nPONG\r\n"
    return bytes(out), want


@pytest.mark.parametrize("chunk", [1, 7, 4096, 1 << 20])
def test_parser_reassembles_split_frames(chunk: int) -> None:
    stream, want = _frames()

    async def run() -> None:
        conn = Connection(ConnectOptions(servers=["nats://127.0.0.1:1"]))
        got: list[Msg] = []
        conn.subscribe("x", got.append)  # sid 1, not connected: nothing is sent
        proto = _Protocol(conn)

        class T:
            written = bytearray()

            def write(self, data: bytes) -> None:
                self.written += data

        t = T()
        proto.transport = t  # type: ignore[assignment]
        rnd = random.Random(chunk)
        i = 0
        while i < len(stream):
            n = chunk if chunk > 1 else 1
            if chunk == 7:
                n = rnd.randint(1, 13)
            proto.data_received(stream[i:i + n])
            i += n
        assert [(m.subject, m.reply, m.data, m.headers, m.status) for m in got] == want
        assert bytes(t.written) == b"PONG\r\n"  # the server's PING answered
        assert conn.max_payload == 1048576
        assert not proto.buf

    asyncio.run(run())


def test_request_reply_headers_and_large_payloads(nats: NatsServer) -> None:
    async def run() -> None:
        server = await Connection.open(ConnectOptions(servers=[nats.url]))
        client = await Connection.open(ConnectOptions(servers=[nats.url]))

        def echo(m: Msg) -> None:
            server.publish(m.reply, m.data[::-1], headers={"Got": m.headers.get("X", "")})

        server.subscribe("echo", echo)
        await server.flush()
        payloads = [b"", b"x", bytes(range(256)) * 3000, b"\r\n" * 1000]
        replies = await asyncio.gather(*(client.request("echo", p, 5, headers={"X": str(len(p))}) for p in payloads))
        for p, r in zip(payloads, replies):
            assert r.data == p[::-1]
            assert r.headers["Got"] == str(len(p))
        await client.close()
        await server.close()

    asyncio.run(run())


def test_no_responders_and_timeout(nats: NatsServer) -> None:
    async def run() -> None:
        c = await Connection.open(ConnectOptions(servers=[nats.url]))
        with pytest.raises(NoRespondersError):
            await c.request("nobody.here", b"", 5)
        c.subscribe("silent", lambda m: None)
        await c.flush()
        with pytest.raises(RequestTimeoutError):
            await c.request("silent", b"", 0.2)
        await c.close()

    asyncio.run(run())


def test_reconnect_fails_inflight_requests_and_restores_subscriptions(nats_server_bin: Path) -> None:
    port = free_port()
    srv = NatsServer(nats_server_bin, port)

    async def run() -> None:
        nonlocal srv
        statuses: list[str] = []
        c = await Connection.open(ConnectOptions(servers=[srv.url], reconnect_wait=0.05))
        c.add_status_listener(statuses.append)
        got: asyncio.Queue[Msg] = asyncio.Queue()
        c.subscribe("after", got.put_nowait)
        c.subscribe("silent", lambda m: None)
        await c.flush()
        pending = asyncio.ensure_future(c.request("silent", b"", 30))
        await asyncio.sleep(0)  # the request is written
        await c.flush()
        await asyncio.to_thread(srv.stop)
        with pytest.raises(ConnectionLostError):
            await pending
        srv = await asyncio.to_thread(NatsServer, nats_server_bin, port)
        while "reconnected" not in statuses:
            await asyncio.sleep(0.02)
        c.publish("after", b"again")
        m = await asyncio.wait_for(got.get(), 5)
        assert m.data == b"again"
        assert statuses[:2] == ["disconnected", "reconnected"]
        await c.close()

    try:
        asyncio.run(run())
    finally:
        srv.stop()


def test_server_binary_is_a_nats_server(nats_server_bin: Path) -> None:
    out = subprocess.run([str(nats_server_bin), "--version"], capture_output=True, text=True)
    assert "nats-server" in out.stdout + out.stderr
