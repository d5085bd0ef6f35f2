"""A small asyncio client for the NATS core protocol.

It implements the subset foldstream needs: INFO/CONNECT (user and
password, token, nkey seed or .creds file, TLS), PUB/HPUB with headers,
SUB/UNSUB, MSG/HMSG, PING/PONG, -ERR, request/reply through one muxed
private inbox, and reconnecting with backoff. It exists so that the
package has no runtime dependency (nats-py is not required).

Invariant: every method that touches the connection's state runs on the
event loop the connection was opened on.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import secrets
import ssl
import string
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlparse

from . import _nkeys
from .errors import (
    AuthorizationError,
    ConnectionClosedError,
    ConnectionLostError,
    FoldstreamError,
    InboxPermissionError,
    NoRespondersError,
    PermissionViolationError,
    RequestTimeoutError,
)

__all__ = ["Msg", "Connection", "ConnectOptions", "new_token"]

_CRLF = b"\r\n"
_Target = typing.Union["asyncio.Future[Msg]", Callable[["Msg | None", "BaseException | None"], None]]
_MAX_CONTROL_LINE = 64 * 1024
_TOKEN_CHARS = string.ascii_letters + string.digits
_VERSION = "1.0.0"


def new_token(n: int = 22) -> str:
    """A random subject token of n characters from [A-Za-z0-9]."""
    return "".join(secrets.choice(_TOKEN_CHARS) for _ in range(n))


@dataclass
class Msg:
    """A message delivered to a subscription."""

    subject: str
    reply: str
    data: bytes
    headers: dict[str, str] = field(default_factory=dict)
    # status is the NATS status of a message without payload semantics:
    # "503" (no responders), "100" (heartbeat or flow control), "408", "409".
    status: str = ""
    description: str = ""


def _parse_headers(raw: bytes) -> tuple[dict[str, str], str, str]:
    text = raw.decode("utf-8", "replace")
    lines = text.split("\r\n")
    status = description = ""
    first = lines[0]
    if first.startswith("NATS/1.0"):
        rest = first[len("NATS/1.0"):].strip()
        if rest:
            status, _, description = rest.partition(" ")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        k, sep, v = line.partition(":")
        if sep and k.strip() not in headers:
            headers[k.strip()] = v.strip()
    return headers, status, description


def encode_headers(headers: dict[str, str]) -> bytes:
    """A NATS/1.0 header block (line breaks in values become spaces)."""
    return _encode_headers(headers)


def _encode_headers(headers: dict[str, str]) -> bytes:
    out = ["NATS/1.0"]
    for k, v in headers.items():
        if any(c in k for c in "\r\n: "):
            raise ValueError(f"header {k!r}: expected a name without line breaks, spaces or colons")
        if "\r" in v or "\n" in v:
            v = v.replace("\r", " ").replace("\n", " ")  # as Go's http.Header writes them
        out.append(f"{k}: {v}")
    return ("\r\n".join(out) + "\r\n\r\n").encode()


@dataclass
class ConnectOptions:
    """How to reach and log in to a NATS server."""

    servers: list[str]
    user: str | None = None
    password: str | None = None
    token: str | None = None
    nkey_seed: str | None = None
    creds: str | None = None
    tls: ssl.SSLContext | None = None
    name: str = "foldstream-python"
    inbox_prefix: str = "_INBOX"
    connect_timeout: float = 5.0
    reconnect: bool = True
    max_reconnect_attempts: int = -1  # -1: forever
    reconnect_wait: float = 0.25
    reconnect_wait_max: float = 2.0
    ping_interval: float = 30.0
    max_pings_out: int = 2
    pending_limit: int = 8 * 1024 * 1024
    on_error: Callable[[Exception], None] | None = None


@dataclass
class _Server:
    host: str
    port: int
    tls: bool
    user: str | None
    password: str | None


def _parse_server(url: str) -> _Server:
    if "://" not in url:
        url = "nats://" + url
    u = urlparse(url)
    if u.scheme not in ("nats", "tls"):
        raise ValueError(f"servers: expected nats:// or tls:// URLs, got {url!r}")
    return _Server(host=u.hostname or "127.0.0.1", port=u.port or 4222, tls=u.scheme == "tls",
                   user=u.username or None, password=u.password or None)


class _Sub:
    __slots__ = ("sid", "subject", "queue", "cb")

    def __init__(self, sid: int, subject: str, queue: str, cb: Callable[[Msg], None]) -> None:
        self.sid, self.subject, self.queue, self.cb = sid, subject, queue, cb


class _Protocol(asyncio.Protocol):
    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.writable = asyncio.Event()
        self.writable.set()
        self.lost = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self.conn._process(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.writable.set()
        self.conn._on_lost(self, exc)

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()


_ERR_PERM = re.compile(r"permissions violation for (subscription|publish) to \"?([^\"]+)\"?", re.I)


class Connection:
    """One NATS connection with automatic reconnect.

    Create it with :meth:`open`; every request shares one wildcard
    subscription under the inbox prefix.
    """

    def __init__(self, opts: ConnectOptions) -> None:
        if not opts.servers:
            raise ValueError("servers: expected at least one NATS URL, e.g. nats://127.0.0.1:4222")
        self.opts = opts
        self._servers = [_parse_server(s) for s in opts.servers]
        self._loop = asyncio.get_running_loop()
        self._proto: _Protocol | None = None
        self._info: dict[str, object] = {}
        self._wbuf = bytearray()
        self._flush_scheduled = False
        self._connected = False
        self._closed = False
        self._subs: dict[int, _Sub] = {}
        self._next_sid = 0
        self._pongs: list[asyncio.Future[None]] = []
        self._pings_out = 0
        self._handshake_err: FoldstreamError | None = None
        self._info_fut: asyncio.Future[None] | None = None
        self._handshake_proto: _Protocol | None = None
        self._resp_prefix = f"{opts.inbox_prefix}.{new_token()}."
        self._resp_sub: _Sub | None = None
        self._pending: dict[str, tuple[_Target, str]] = {}
        self._next_req = 0
        self._ping_task: asyncio.Task[None] | None = None
        self._reconnect_task: asyncio.Task[None] | None = None
        self._status_cbs: list[Callable[[str], None]] = []
        self._server_index = 0
        self._sub_violations: list[str] = []
        self.last_error: Exception | None = None
        self.reconnects = 0
        self.bytes_out = 0  # bytes handed to the connection by publish/subscribe

    # ---- opening ---------------------------------------------------------

    @classmethod
    async def open(cls, opts: ConnectOptions) -> Connection:
        """Connect to the first server that answers and check the inbox.

        Raises InboxPermissionError at once when the server refuses the
        subscription to this connection's reply inbox.
        """
        conn = cls(opts)
        errors: list[str] = []
        for i in range(len(conn._servers)):
            try:
                await conn._handshake(i)
                break
            except (AuthorizationError, InboxPermissionError):
                await conn.close()
                raise
            except (OSError, asyncio.TimeoutError, FoldstreamError, ssl.SSLError) as e:
                srv = conn._servers[i]
                errors.append(f"{srv.host}:{srv.port}: {e or type(e).__name__}")
        else:
            conn._closed = True
            raise ConnectionClosedError("could not connect to any NATS server: " + "; ".join(errors))
        conn._ping_task = asyncio.ensure_future(conn._pinger())
        return conn

    def _auth_fields(self, srv: _Server) -> dict[str, object]:
        o = self.opts
        f: dict[str, object] = {}
        user = o.user or srv.user
        password = o.password or srv.password
        if user:
            f["user"] = user
            f["pass"] = password or ""
        if o.token:
            f["auth_token"] = o.token
        nonce = str(self._info.get("nonce", ""))
        if o.creds:
            jwt, seed = _nkeys.read_creds(o.creds)
            f["jwt"] = jwt
            f["sig"] = _nkeys.sign(seed, nonce.encode())
        elif o.nkey_seed:
            seed = _nkeys.read_seed(o.nkey_seed)
            f["nkey"] = _nkeys.public_key(seed)
            f["sig"] = _nkeys.sign(seed, nonce.encode())
        return f

    async def _handshake(self, index: int) -> None:
        srv = self._servers[index]
        self._server_index = index
        loop = self._loop
        proto = _Protocol(self)
        self._handshake_proto = proto
        self._info_fut = loop.create_future()
        self._handshake_err = None
        self._sub_violations = []
        transport, _ = await asyncio.wait_for(
            loop.create_connection(lambda: proto, srv.host, srv.port), self.opts.connect_timeout)
        try:
            await asyncio.wait_for(self._info_fut, self.opts.connect_timeout)
            if self._handshake_err:
                raise self._handshake_err
            want_tls = srv.tls or self.opts.tls is not None or bool(self._info.get("tls_required"))
            if want_tls:
                ctx = self.opts.tls or ssl.create_default_context()
                hostname = srv.host if ctx.check_hostname else None
                new = await asyncio.wait_for(
                    loop.start_tls(transport, proto, ctx, server_hostname=hostname), self.opts.connect_timeout)
                if new is None:
                    raise ConnectionClosedError(f"TLS handshake with {srv.host}:{srv.port} failed")
                assert isinstance(new, asyncio.Transport)
                transport = new
                proto.transport = new
            connect: dict[str, object] = {
                "verbose": False, "pedantic": False, "lang": "python-foldstream", "version": _VERSION,
                "protocol": 1, "headers": True, "no_responders": True, "name": self.opts.name,
                "tls_required": want_tls,
            }
            connect.update(self._auth_fields(srv))
            pong: asyncio.Future[None] = loop.create_future()
            self._pongs = [pong]
            self._pings_out = 0
            transport.write(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
            await asyncio.wait_for(pong, self.opts.connect_timeout)
            if self._handshake_err:
                raise self._handshake_err
            # Subscriptions first (the inbox among them), then one more
            # PING: a refused subscription's -ERR comes before its PONG.
            self._proto = proto
            if self._resp_sub is None:
                self._next_sid += 1
                self._resp_sub = _Sub(self._next_sid, self._resp_prefix + "*", "", self._on_response)
                self._subs[self._resp_sub.sid] = self._resp_sub
            out = bytearray()
            for s in self._subs.values():
                out += f"SUB {s.subject} {s.queue + ' ' if s.queue else ''}{s.sid}\r\n".encode()
            pong2: asyncio.Future[None] = loop.create_future()
            self._pongs.append(pong2)
            out += b"PING\r\n"
            transport.write(bytes(out))
            await asyncio.wait_for(pong2, self.opts.connect_timeout)
            if self._handshake_err:
                raise self._handshake_err
            for subject in self._sub_violations:
                if subject.startswith(self.opts.inbox_prefix + "."):
                    raise self._inbox_error(subject)
            self._connected = True
            self._handshake_proto = None
            if self._wbuf:
                self._schedule_flush()
        except BaseException:
            self._proto = None
            self._handshake_proto = None
            transport.close()
            raise

    def _inbox_error(self, subject: str) -> InboxPermissionError:
        user = self.opts.user or self._servers[self._server_index].user
        expected = f"_INBOX_{user}" if user else "_INBOX_<user>"
        return InboxPermissionError(
            f"the NATS server refused this connection's reply inbox {subject!r} (permissions violation): "
            f"connect with inbox_prefix={expected!r} (the shipped auth configs let each user read replies "
            f"only under _INBOX_<user>); the inbox prefix in use is {self.opts.inbox_prefix!r}",
            inbox_prefix=self.opts.inbox_prefix, expected=expected)

    # ---- parsing ---------------------------------------------------------

    def _process(self, proto: _Protocol) -> None:
        buf = proto.buf
        pos = 0
        n = len(buf)
        try:
            while pos < n:
                end = buf.find(_CRLF, pos)
                if end < 0:
                    if n - pos > _MAX_CONTROL_LINE:
                        raise ValueError("control line too long")
                    break
                op = bytes(buf[pos:pos + 4]).upper()
                if op == b"MSG " or op == b"HMSG":
                    args = bytes(buf[pos + (4 if op == b"MSG " else 5):end]).split()
                    hdr_len = 0
                    if op == b"HMSG":
                        total = int(args[-1])
                        hdr_len = int(args[-2])
                        rest = args[:-2]
                    else:
                        total = int(args[-1])
                        rest = args[:-1]
                    start = end + 2
                    if start + total + 2 > n:
                        break  # the payload is still on its way
                    subject = rest[0].decode()
                    sid = int(rest[1])
                    reply = rest[2].decode() if len(rest) > 2 else ""
                    headers: dict[str, str] = {}
                    status = description = ""
                    if hdr_len:
                        headers, status, description = _parse_headers(bytes(buf[start:start + hdr_len]))
                    data = bytes(buf[start + hdr_len:start + total])
                    pos = start + total + 2
                    sub = self._subs.get(sid)
                    if sub is not None:
                        try:
                            sub.cb(Msg(subject, reply, data, headers, status, description))
                        except Exception as e:  # a callback's bug must not kill the reader
                            self._report(e)
                    continue
                line = bytes(buf[pos:end])
                pos = end + 2
                if op == b"PING":
                    self._write_now(proto, b"PONG\r\n")
                elif op == b"PONG":
                    self._pings_out = 0
                    if self._pongs:
                        f = self._pongs.pop(0)
                        if not f.done():
                            f.set_result(None)
                elif op == b"INFO":
                    self._info = json.loads(line[5:])
                    if self._info_fut is not None and not self._info_fut.done():
                        self._info_fut.set_result(None)
                elif op == b"-ERR":
                    self._on_err(line[4:].strip().strip(b"'").decode("utf-8", "replace"))
                # +OK and anything unknown are ignored.
        except (ValueError, IndexError, UnicodeDecodeError) as e:
            del buf[:pos]
            self._report(FoldstreamError(f"NATS protocol error: {e}"))
            if proto.transport is not None:
                proto.transport.close()
            return
        del buf[:pos]

    def _on_err(self, text: str) -> None:
        m = _ERR_PERM.search(text)
        if m:
            kind, subject = m.group(1).lower(), m.group(2)
            if kind == "subscription":
                self._sub_violations.append(subject)
                if self._connected and subject.startswith(self.opts.inbox_prefix + "."):
                    err: Exception = self._inbox_error(subject)
                else:
                    err = PermissionViolationError(f"NATS permissions violation: subscription to {subject!r} refused")
                self._report(err)
                return
            # A refused publish: fail the requests that went there.
            err = PermissionViolationError(f"NATS permissions violation: publish to {subject!r} refused")
            for token, (target, subj) in list(self._pending.items()):
                if subj == subject:
                    self._pending.pop(token, None)
                    self._settle(target, None, err)
            self._report(err)
            return
        if "authorization" in text.lower() or "authentication" in text.lower() or "user" in text.lower() and "expired" in text.lower():
            err2: FoldstreamError = AuthorizationError(f"NATS server: {text}")
        else:
            err2 = FoldstreamError(f"NATS server: {text}")
        if not self._connected:
            self._handshake_err = err2
            for f in self._pongs:
                if not f.done():
                    f.set_result(None)
            self._pongs = []
        self.last_error = err2
        self._report(err2)

    def _report(self, err: Exception) -> None:
        self.last_error = err
        if self.opts.on_error is not None:
            try:
                self.opts.on_error(err)
            except Exception:
                pass

    # ---- writing ---------------------------------------------------------

    def _write_now(self, proto: _Protocol, data: bytes) -> None:
        if proto.transport is not None and not proto.lost:
            proto.transport.write(data)

    def _send(self, data: bytes) -> None:
        if self._closed:
            raise ConnectionClosedError("connection closed")
        if not self._connected and len(self._wbuf) + len(data) > self.opts.pending_limit:
            raise ConnectionLostError(
                f"disconnected from NATS and {len(self._wbuf)} bytes already wait for the reconnect")
        self._wbuf += data
        self.bytes_out += len(data)
        if self._connected:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        proto = self._proto
        if not self._connected or proto is None or proto.transport is None or not self._wbuf:
            return
        data = bytes(self._wbuf)
        self._wbuf.clear()
        proto.transport.write(data)

    async def drain_writes(self) -> None:
        """Wait while the socket's write buffer is over its high-water mark."""
        proto = self._proto
        if proto is not None and self._connected:
            await proto.writable.wait()

    @property
    def max_payload(self) -> int:
        """The server's max_payload (bytes)."""
        v = self._info.get("max_payload", 1024 * 1024)
        return int(v) if isinstance(v, int) else 1024 * 1024

    @property
    def is_connected(self) -> bool:
        """Whether the connection is up now."""
        return self._connected

    @property
    def closed(self) -> bool:
        """Whether close() was called or reconnecting gave up."""
        return self._closed

    def publish(self, subject: str, data: bytes = b"", *, reply: str = "",
                headers: dict[str, str] | None = None, raw_headers: bytes | None = None) -> None:
        """Queue a message; it is written on the next loop iteration.

        raw_headers, if given, is the encoded header block (see encode_headers).
        """
        if len(data) > self.max_payload:
            raise FoldstreamError(
                f"payload of {len(data)} bytes exceeds the server's max_payload {self.max_payload}")
        r = f" {reply}" if reply else ""
        if headers or raw_headers:
            h = raw_headers or _encode_headers(headers or {})
            self._send(f"HPUB {subject}{r} {len(h)} {len(h) + len(data)}\r\n".encode() + h + data + _CRLF)
        else:
            self._send(f"PUB {subject}{r} {len(data)}\r\n".encode() + data + _CRLF)

    # ---- subscriptions ---------------------------------------------------

    def subscribe(self, subject: str, cb: Callable[[Msg], None], queue: str = "") -> int:
        """Subscribe; cb runs on the loop for each message and must not block."""
        self._next_sid += 1
        sid = self._next_sid
        self._subs[sid] = _Sub(sid, subject, queue, cb)
        if self._connected:
            self._send(f"SUB {subject} {queue + ' ' if queue else ''}{sid}\r\n".encode())
        return sid

    def unsubscribe(self, sid: int) -> None:
        """Remove a subscription (no-op if it is gone)."""
        if self._subs.pop(sid, None) is not None and self._connected:
            self._send(f"UNSUB {sid}\r\n".encode())

    def new_inbox(self) -> str:
        """A fresh subject under the inbox prefix."""
        return f"{self.opts.inbox_prefix}.{new_token()}"

    # ---- request/reply ---------------------------------------------------

    def _settle(self, target: _Target, msg: Msg | None, exc: BaseException | None) -> None:
        if isinstance(target, asyncio.Future):
            if target.done():
                return
            if exc is not None:
                target.set_exception(exc)
                target.exception()  # whoever awaits it still gets it; nobody else is warned
            elif msg is not None:
                target.set_result(msg)
            return
        try:
            target(msg, exc)
        except Exception as e:  # a callback's bug must not kill the reader
            self._report(e)

    def _on_response(self, msg: Msg) -> None:
        token = msg.subject[len(self._resp_prefix):]
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        target, subject = entry
        if msg.status == "503" and not msg.data:
            self._settle(target, None, NoRespondersError(f"no responders on {subject}"))
        else:
            self._settle(target, msg, None)

    def _request(self, subject: str, data: bytes, headers: dict[str, str] | None, raw_headers: bytes | None,
                 target: _Target) -> str:
        self._next_req += 1
        token = str(self._next_req)
        self._pending[token] = (target, subject)
        try:
            self.publish(subject, data, reply=self._resp_prefix + token, headers=headers, raw_headers=raw_headers)
        except BaseException:
            self._pending.pop(token, None)
            raise
        return token

    def request_future(self, subject: str, data: bytes, headers: dict[str, str] | None = None, *,
                       raw_headers: bytes | None = None) -> asyncio.Future[Msg]:
        """Send a request; the future resolves with the reply.

        It fails with NoRespondersError, PermissionViolationError, or
        ConnectionLostError when the connection drops before the reply.
        """
        fut: asyncio.Future[Msg] = self._loop.create_future()
        self._request(subject, data, headers, raw_headers, fut)
        return fut

    def request_cb(self, subject: str, data: bytes, cb: Callable[[Msg | None, BaseException | None], None], *,
                   raw_headers: bytes | None = None) -> str:
        """Send a request; cb(reply, None) or cb(None, error) runs on the loop, once.

        The cheapest form, for many requests in flight (no future per
        request). Returns a token for forget_token.
        """
        return self._request(subject, data, None, raw_headers, cb)

    def forget_token(self, token: str) -> None:
        """Drop a pending request_cb request (its callback will not run)."""
        self._pending.pop(token, None)

    def forget(self, fut: asyncio.Future[Msg]) -> None:
        """Drop a pending request (after its caller gave up waiting)."""
        for token, (f, _) in list(self._pending.items()):
            if f is fut:
                del self._pending[token]
                return

    async def request(self, subject: str, data: bytes, timeout: float,
                      headers: dict[str, str] | None = None) -> Msg:
        """Send a request and wait up to timeout seconds for the reply."""
        fut = self.request_future(subject, data, headers)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self.forget(fut)
            raise RequestTimeoutError(f"no reply on {subject} within {timeout:g}s") from None

    async def flush(self, timeout: float = 5.0) -> None:
        """Round trip to the server: everything written before it has arrived."""
        if not self._connected:
            raise ConnectionLostError("not connected")
        f: asyncio.Future[None] = self._loop.create_future()
        self._pongs.append(f)
        self._send(b"PING\r\n")
        try:
            await asyncio.wait_for(f, timeout)
        except asyncio.TimeoutError:
            raise RequestTimeoutError(f"no PONG within {timeout:g}s") from None

    # ---- status, loss and reconnect ------------------------------------

    def add_status_listener(self, cb: Callable[[str], None]) -> None:
        """cb("disconnected") and cb("reconnected") run on the loop."""
        self._status_cbs.append(cb)

    def remove_status_listener(self, cb: Callable[[str], None]) -> None:
        """Undo add_status_listener."""
        if cb in self._status_cbs:
            self._status_cbs.remove(cb)

    def _notify(self, status: str) -> None:
        for cb in list(self._status_cbs):
            try:
                cb(status)
            except Exception as e:
                self._report(e)

    def _fail_pending(self, err: Exception) -> None:
        pending, self._pending = self._pending, {}
        for target, _ in pending.values():
            self._settle(target, None, err)
        pongs, self._pongs = self._pongs, []
        for p in pongs:
            if not p.done():
                p.set_exception(err)
                p.exception()  # a flush() awaiting it still raises; an abandoned handshake's stays quiet

    def _on_lost(self, proto: _Protocol, exc: Exception | None) -> None:
        if proto is not self._proto:
            if proto is self._handshake_proto:
                # A handshake in progress: fail what it waits for now
                # rather than at its timeout.
                err = ConnectionLostError("connection closed by the server during the handshake"
                                          + (f": {exc}" if exc else ""))
                if self._handshake_err is None:
                    self._handshake_err = err
                if self._info_fut is not None and not self._info_fut.done():
                    self._info_fut.set_result(None)  # the handshake sees _handshake_err
                for f in self._pongs:
                    if not f.done():
                        f.set_result(None)
            return
        self._proto = None
        was = self._connected
        self._connected = False
        if not was:
            # Lost during the handshake's last round trip: fail it now.
            if self._handshake_err is None:
                self._handshake_err = ConnectionLostError("connection closed by the server during the handshake")
            for f in self._pongs:
                if not f.done():
                    f.set_result(None)
            return
        if self._closed:
            return
        srv = self._servers[self._server_index]
        self._fail_pending(ConnectionLostError(
            f"connection to {srv.host}:{srv.port} lost before the reply" + (f": {exc}" if exc else "")))
        self._notify("disconnected")
        if self.opts.reconnect:
            self._reconnect_task = asyncio.ensure_future(self._reconnect())
        else:
            self._closed = True
            self._notify("closed")

    async def _reconnect(self) -> None:
        attempt = 0
        wait = self.opts.reconnect_wait
        while not self._closed:
            attempt += 1
            if 0 <= self.opts.max_reconnect_attempts < attempt:
                break
            n = len(self._servers)
            for i in [(self._server_index + k) % n for k in range(n)]:
                if self._closed:
                    return
                try:
                    await self._handshake(i)
                except InboxPermissionError as e:
                    self._report(e)
                    continue
                except (OSError, asyncio.TimeoutError, FoldstreamError, ssl.SSLError) as e:
                    self.last_error = e
                    continue
                self.reconnects += 1
                self._notify("reconnected")
                return
            await asyncio.sleep(wait * (0.5 + random.random()))
            wait = min(wait * 2, self.opts.reconnect_wait_max)
        if not self._closed:
            self._closed = True
            self._fail_pending(ConnectionClosedError("gave up reconnecting"))
            self._notify("closed")

    async def _pinger(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.opts.ping_interval)
            if not self._connected or self._proto is None:
                continue
            self._pings_out += 1
            if self._pings_out > self.opts.max_pings_out:
                self._report(ConnectionLostError("stale connection: the server stopped answering PINGs"))
                if self._proto.transport is not None:
                    self._proto.transport.close()
                continue
            try:
                self._send(b"PING\r\n")
            except FoldstreamError:
                pass

    def kill_for_test(self) -> None:
        """Drop the socket as a network failure would; the connection then reconnects (for tests)."""
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.abort()

    async def close(self) -> None:
        """Flush what is queued, close the socket, fail what still waits."""
        if self._closed and self._proto is None:
            return
        if self._connected:
            self._flush()
        self._closed = True
        self._connected = False
        for t in (self._ping_task, self._reconnect_task):
            if t is not None and not t.done():
                t.cancel()
        proto, self._proto = self._proto, None
        if proto is not None and proto.transport is not None:
            proto.transport.close()
        self._fail_pending(ConnectionClosedError("connection closed"))
        self._notify("closed")

