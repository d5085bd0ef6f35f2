"""The foldstream client: publish a bot's turns, ask for packed contexts."""

from __future__ import annotations

import asyncio
import collections
import functools
import json
import os
import re
import ssl
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

from . import _validate as v
from ._transport import ConnectOptions, Connection, Msg, encode_headers
from ._watch import SummaryWatch
from .errors import (
    BatchPublishError,
    FoldstreamError,
    NoRespondersError,
    PublishError,
    PublishTimeoutError,
    RequestTimeoutError,
    ServiceError,
    UnknownSessionError,
    ValidationError,
)
from .types import Context, PubAck, Recall, SessionInfo, Turn

__all__ = ["Client", "connect", "turn_msg_id", "note_msg_id", "stream_name", "service_subject"]

MSG_ID_HEADER = "Nats-Msg-Id"
_MAX_TRACKED = 100_000
_PUB_ACK = re.compile(rb'\{"stream":"([^"\\]*)",(?:"domain":"([^"\\]*)",)?"seq":(\d+)(,"duplicate":true)?\}\s*\Z')
SERVICE_ERROR_CODE_HEADER = "Nats-Service-Error-Code"
SERVICE_ERROR_HEADER = "Nats-Service-Error"


def turn_msg_id(session: str, turn_id: str) -> str:
    """The Nats-Msg-Id of a turn: "<session>:<turn_id>" (the stream dedups per stream, not per session)."""
    return f"{session}:{turn_id}"


def note_msg_id(session: str, note_id: str) -> str:
    """The Nats-Msg-Id of a note: "<session>:note:<note_id>"."""
    return f"{session}:note:{note_id}"


def stream_name(prefix: str, suffix: str) -> str:
    """The stream name the processor derives from the prefix: "fold" → FOLD_IN, FOLD_OUT."""
    return prefix.replace(".", "_").replace("-", "_").upper() + "_" + suffix


def service_subject(prefix: str, endpoint: str) -> str:
    """The subject of a service endpoint: <prefix>.svc.<endpoint>."""
    return f"{prefix}.svc.{endpoint}"


def _check_inbox_prefix(prefix: str) -> None:
    for tok in prefix.split("."):
        if tok == "" or any(c in tok for c in "*> \t\r\n"):
            raise ValueError(f"inbox_prefix: expected subject tokens without wildcards, spaces or empty tokens, "
                             f"e.g. _INBOX_bot, got {prefix!r}")


def _check_prefix(prefix: str) -> None:
    for tok in prefix.split("."):
        if tok == "" or any(c in tok for c in " \t\r\n*>"):
            raise ValueError(f"prefix: {prefix!r}: expected dot-separated tokens without spaces or wildcards")


def _tls_context(tls: ssl.SSLContext | bool | None, ca: str | None, cert: str | None,
                 key: str | None) -> ssl.SSLContext | None:
    if isinstance(tls, ssl.SSLContext):
        return tls
    if not tls and not ca and not cert:
        return None
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


async def connect(
    servers: str | list[str] = "nats://127.0.0.1:4222",
    *,
    inbox_prefix: str = "_INBOX",
    user: str | None = None,
    password: str | None = None,
    token: str | None = None,
    nkey_seed: str | os.PathLike[str] | None = None,
    creds: str | os.PathLike[str] | None = None,
    tls: ssl.SSLContext | bool | None = None,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    prefix: str = "fold",
    name: str = "foldstream-python",
    request_timeout: float = 5.0,
    ack_timeout: float = 10.0,
    max_pending: int = 256,
    limits: v.Limits | None = None,
    connect_timeout: float = 5.0,
    reconnect: bool = True,
    max_reconnect_attempts: int = -1,
    reconnect_wait: float = 0.25,
    on_error: Callable[[Exception], None] | None = None,
) -> Client:
    """Connect to NATS and return a :class:`Client` (also an async context manager).

    ``servers`` is a URL or a list (``nats://`` or ``tls://``; a comma
    separated string works too). With the shipped auth configs (nats/auth)
    each user may read replies only under ``_INBOX_<user>``: pass
    ``inbox_prefix="_INBOX_bot"``. A server that refuses the inbox raises
    :class:`~foldstream.errors.InboxPermissionError` here, at once, naming
    the prefix to set. ``nkey_seed`` is a seed ("SU...") or a seed file's
    path; ``creds`` a .creds file's path (both need PyNaCl). TLS: pass an
    ``ssl.SSLContext``, or ``tls_ca``/``tls_cert``/``tls_key`` paths, or
    ``tls=True`` for the system's CAs.
    """
    if isinstance(servers, str):
        servers = [s.strip() for s in servers.split(",") if s.strip()]
    _check_inbox_prefix(inbox_prefix)
    _check_prefix(prefix)
    if max_pending < 1:
        raise ValueError(f"max_pending: expected at least 1, got {max_pending}")
    for fname, val in (("request_timeout", request_timeout), ("ack_timeout", ack_timeout)):
        if val <= 0:
            raise ValueError(f"{fname}: expected a positive number of seconds, got {val}")
    opts = ConnectOptions(
        servers=list(servers), user=user, password=password, token=token,
        nkey_seed=os.fspath(nkey_seed) if nkey_seed is not None else None,
        creds=os.fspath(creds) if creds is not None else None,
        tls=_tls_context(tls, tls_ca, tls_cert, tls_key), name=name, inbox_prefix=inbox_prefix,
        connect_timeout=connect_timeout, reconnect=reconnect, max_reconnect_attempts=max_reconnect_attempts,
        reconnect_wait=reconnect_wait, on_error=on_error)
    conn = await Connection.open(opts)
    return Client(conn, prefix=prefix, request_timeout=request_timeout, ack_timeout=ack_timeout,
                  max_pending=max_pending, limits=limits, on_error=on_error)


class Client:
    """A bot's and a prompt builder's side of foldstream, over one NATS connection.

    Publishing validates every event as the processor would and raises
    :class:`~foldstream.errors.ValidationError` naming the field before
    anything is sent. Use :func:`connect` to create one.
    """

    def __init__(self, conn: Connection, *, prefix: str = "fold", request_timeout: float = 5.0,
                 ack_timeout: float = 10.0, max_pending: int = 256, limits: v.Limits | None = None,
                 on_error: Callable[[Exception], None] | None = None) -> None:
        self._conn = conn
        self.prefix = prefix
        self.request_timeout = request_timeout
        self.ack_timeout = ack_timeout
        self.max_pending = max_pending
        self.limits = limits or v.Limits()
        self._on_error = on_error
        # session → highest stream seq acknowledged to this client, for
        # wait_caught_up; the least recently published sessions are
        # forgotten beyond _MAX_TRACKED.
        self._acked: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.in_stream = stream_name(prefix, "IN")
        self.out_stream = stream_name(prefix, "OUT")

    @property
    def connection(self) -> Connection:
        """The underlying NATS connection."""
        return self._conn

    async def close(self) -> None:
        """Close the connection (pending requests fail with ConnectionClosedError)."""
        await self._conn.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- publishing ------------------------------------------------------

    def _subject_in(self, session: str, kind: str) -> str:
        return f"{self.prefix}.in.{session}.{kind}"

    def _turn_event(self, t: Turn) -> dict[str, Any]:
        v.check_session("session", t.session)
        at = t.at if t.at is not None else v.now_utc()
        ev: dict[str, Any] = {"v": v.WIRE_VERSION, "session": t.session, "turn_id": t.turn_id,
                              "at": v.format_time(at) if isinstance(at, datetime) else at,
                              "speaker": t.speaker, "role": t.role, "text": t.text}
        for key in ("kind", "tool", "tokens", "context_tokens", "meta"):
            val = getattr(t, key)
            if val:
                ev[key] = val
        # An at this client formatted is RFC 3339 already.
        v.validate_event("turn", t.session, ev, self.limits, _trusted_at=isinstance(at, datetime))
        return ev

    def _prepare_turn(self, t: Turn) -> tuple[str, bytes, bytes]:
        ev = self._turn_event(t)
        return (self._subject_in(t.session, "turn"), v.encode(ev, self.limits),
                encode_headers({MSG_ID_HEADER: turn_msg_id(t.session, t.turn_id)}))

    def _ack(self, msg: Msg, subject: str, session: str, what: str, turn_id: str = "") -> PubAck:
        m = _PUB_ACK.match(msg.data)
        if m:  # the common reply, without a JSON decoder
            ack = PubAck(m.group(1).decode(), int(m.group(3)), m.group(4) is not None,
                         m.group(2).decode() if m.group(2) else "")
            self._note_ack(session, ack.seq)
            return ack
        try:
            d = json.loads(msg.data)
        except ValueError:
            raise PublishError(f"{what} on {subject}: undecodable acknowledgement {msg.data[:80]!r}",
                               session=session, turn_id=turn_id, subject=subject) from None
        err = d.get("error")
        if err:
            raise PublishError(f"{what} on {subject} not stored: {err.get('description', err)} "
                               f"(JetStream error {err.get('err_code', err.get('code'))})",
                               session=session, turn_id=turn_id, subject=subject)
        ack = PubAck(d.get("stream", ""), d.get("seq", 0), bool(d.get("duplicate")), d.get("domain", ""))
        self._note_ack(session, ack.seq)
        return ack

    def _note_ack(self, session: str, seq: int) -> None:
        self._acked[session] = max(seq, self._acked.pop(session, 0))
        if len(self._acked) > _MAX_TRACKED:
            self._acked.popitem(last=False)

    async def _publish(self, subject: str, data: bytes, headers: bytes | None, session: str,
                       what: str, turn_id: str = "") -> PubAck:
        try:
            fut = self._conn.request_future(subject, data, raw_headers=headers)
            try:
                msg = await asyncio.wait_for(fut, self.ack_timeout)
            except asyncio.TimeoutError:
                self._conn.forget(fut)
                raise PublishTimeoutError(f"{what} not acknowledged on {subject} within {self.ack_timeout:g}s",
                                          session=session, turn_id=turn_id, subject=subject) from None
        except PublishTimeoutError:
            raise
        except NoRespondersError as e:
            raise PublishError(f"{what} not stored: no JetStream stream takes {subject} "
                               f"(has the processor created stream {self.in_stream}?)",
                               session=session, turn_id=turn_id, subject=subject, cause=e) from e
        except FoldstreamError as e:
            raise PublishError(f"{what} not acknowledged on {subject}: {e}", session=session, turn_id=turn_id,
                               subject=subject, cause=e) from e
        return self._ack(msg, subject, session, what, turn_id)

    async def publish_turn(
        self, session: str, turn_id: str, speaker: str, text: str, *, role: str = "user",
        at: datetime | str | None = None, kind: str | None = None, tool: str | None = None,
        tokens: int | None = None, context_tokens: int | None = None, meta: Mapping[str, str] | None = None,
    ) -> PubAck:
        """Validate a turn, publish it and wait for the stream's acknowledgement.

        ``at`` defaults to now (a naive datetime is taken as UTC). The
        Nats-Msg-Id is ``<session>:<turn_id>``: publishing the same turn
        again is stored once (the ack says ``duplicate``). Raises
        ValidationError (nothing sent) or PublishError (not acknowledged).
        """
        t = Turn(session, turn_id, speaker, text, role, at, kind, tool, tokens, context_tokens,
                 dict(meta) if meta else None)
        subject, data, headers = self._prepare_turn(t)
        return await self._publish(subject, data, headers, session, f"turn {turn_id!r} of session {session}",
                                   turn_id)

    async def publish_note(self, session: str, note_id: str, text: str, *, source: str | None = None,
                           at: datetime | str | None = None) -> PubAck:
        """Validate a screen-watch/visual note, publish it and wait for the acknowledgement.

        Its Nats-Msg-Id is ``<session>:note:<note_id>``.
        """
        v.check_session("session", session)
        at = at if at is not None else v.now_utc()
        ev: dict[str, Any] = {"v": v.WIRE_VERSION, "session": session, "note_id": note_id,
                              "at": v.format_time(at) if isinstance(at, datetime) else at, "text": text}
        if source:
            ev["source"] = source
        v.validate_event("note", session, ev, self.limits)
        subject = self._subject_in(session, "note")
        return await self._publish(subject, v.encode(ev, self.limits),
                                   encode_headers({MSG_ID_HEADER: note_msg_id(session, note_id)}), session,
                                   f"note {note_id!r} of session {session}")

    async def control(self, session: str, op: str, *, config: Mapping[str, Any] | None = None) -> PubAck:
        """Publish a control event: op "generate", "compact", "end", "reset", or "configure" with config.

        config holds per-session settings (schema/v1/control.json), e.g.
        ``{"recent_window": 20, "batch_size": 5}``; it is validated like the
        processor validates it. Control events carry no Nats-Msg-Id:
        asking twice is asking twice.
        """
        v.check_session("session", session)
        ev: dict[str, Any] = {"v": v.WIRE_VERSION, "session": session, "op": op, "at": v.format_time(v.now_utc())}
        if config is not None:
            ev["config"] = dict(config)
        v.validate_event("control", session, ev, self.limits)
        subject = self._subject_in(session, "control")
        return await self._publish(subject, v.encode(ev, self.limits), None, session,
                                   f"control {op!r} of session {session}")

    async def publish_turns(self, turns: Iterable[Turn], *,
                            on_ack: Callable[[Turn, PubAck], None] | None = None) -> list[PubAck]:
        """Publish a batch of turns, at most ``max_pending`` in flight, and await every acknowledgement.

        Every turn is validated first: an invalid one raises
        ValidationError (its index and field in the message) and nothing
        is sent. When some turns are not acknowledged (connection lost,
        timeout, stream error) the rest still complete and
        :class:`~foldstream.errors.BatchPublishError` lists exactly which
        turns were not acknowledged (publish those again: their
        Nats-Msg-Id makes that safe) and which were. Returns the acks in
        batch order. An exception ``on_ack`` raises does not stop the
        batch: the first one is raised once every turn has its outcome.
        """
        batch = list(turns)
        prepared: list[tuple[str, bytes, bytes]] = []
        for i, t in enumerate(batch):
            try:
                prepared.append(self._prepare_turn(t))
            except ValidationError as e:
                raise ValidationError(e.code, e.field, f"{e.reason} (turn {i} of the batch, turn_id "
                                                       f"{t.turn_id!r}); nothing was published") from None
        results: list[PubAck | BaseException | None] = [None] * len(batch)
        loop = asyncio.get_running_loop()
        space = asyncio.Event()
        inflight = 0
        done_all = loop.create_future()
        remaining = len(batch)
        callback_errors: list[Exception] = []
        # Deadlines in publish order (one timeout for all, so they are
        # sorted); one sweeper instead of a timer per publish.
        deadlines: collections.deque[tuple[float, int, str]] = collections.deque()

        def finish(i: int, res: PubAck | BaseException) -> None:
            nonlocal remaining, inflight
            if results[i] is not None:
                return
            results[i] = res
            inflight -= 1
            space.set()
            remaining -= 1
            try:
                if isinstance(res, PubAck) and on_ack is not None:
                    on_ack(batch[i], res)
            except Exception as e:  # raised once the batch is done: done_all must still be set
                callback_errors.append(e)
            finally:
                if remaining == 0 and not done_all.done():
                    done_all.set_result(None)

        def on_reply(i: int, subject: str, msg: Msg | None, exc: BaseException | None) -> None:
            if exc is not None or msg is None:
                finish(i, exc or RequestTimeoutError("no reply"))
                return
            try:
                finish(i, self._ack(msg, subject, batch[i].session, "turn", batch[i].turn_id))
            except FoldstreamError as e:
                finish(i, e)

        async def sweep() -> None:
            tick = min(0.25, self.ack_timeout / 4)
            while remaining:
                now = loop.time()
                while deadlines and (results[deadlines[0][1]] is not None or deadlines[0][0] <= now):
                    _, i, token = deadlines.popleft()
                    if results[i] is None:
                        self._conn.forget_token(token)
                        t = batch[i]
                        finish(i, PublishTimeoutError(
                            f"turn {t.turn_id!r} of session {t.session} not acknowledged within {self.ack_timeout:g}s",
                            session=t.session, turn_id=t.turn_id, subject=self._subject_in(t.session, "turn")))
                await asyncio.sleep(tick)

        sweeper = asyncio.ensure_future(sweep())
        try:
            for i, (subject, data, headers) in enumerate(prepared):
                while inflight >= self.max_pending:
                    space.clear()
                    await space.wait()
                inflight += 1
                try:
                    token = self._conn.request_cb(subject, data, functools.partial(on_reply, i, subject),
                                                  raw_headers=headers)
                except FoldstreamError as e:
                    finish(i, e)
                    continue
                deadlines.append((loop.time() + self.ack_timeout, i, token))
                if i % 64 == 63:
                    await self._conn.drain_writes()
            if remaining:
                await done_all
        finally:
            sweeper.cancel()
        if callback_errors:
            raise callback_errors[0]
        failed: list[tuple[Any, BaseException]] = []
        acked: list[tuple[Any, Any]] = []
        for t, r in zip(batch, results):
            if isinstance(r, PubAck):
                acked.append((t, r))
            else:
                assert r is not None
                err = r if isinstance(r, PublishError) else PublishError(
                    f"turn {t.turn_id!r} of session {t.session} not acknowledged: {r}",
                    session=t.session, turn_id=t.turn_id, subject=self._subject_in(t.session, "turn"), cause=r)
                failed.append((t, err))
        if failed:
            first = failed[0][1]
            raise BatchPublishError(
                f"{len(failed)} of {len(batch)} turns not acknowledged (publish them again; the first: {first})",
                failed, acked)
        return [r for r in results if isinstance(r, PubAck)]

    # ---- the service -----------------------------------------------------

    async def _request(self, endpoint: str, req: Mapping[str, Any], timeout: float | None) -> dict[str, Any]:
        subject = service_subject(self.prefix, endpoint)
        data = json.dumps(req, separators=(",", ":")).encode()
        try:
            msg = await self._conn.request(subject, data, timeout or self.request_timeout)
        except NoRespondersError as e:
            raise NoRespondersError(f"{endpoint}: no foldstream service is listening on {subject} "
                                    f"(is the processor running with --service?)") from e
        except RequestTimeoutError as e:
            raise RequestTimeoutError(f"{endpoint} request on {subject}: {e}") from e
        code = msg.headers.get(SERVICE_ERROR_CODE_HEADER, "")
        if code:
            raise ServiceError.from_reply(code, msg.headers.get(SERVICE_ERROR_HEADER, ""))
        try:
            out = json.loads(msg.data)
        except ValueError as e:
            raise FoldstreamError(f"decode {endpoint} reply: {e}") from None
        if not isinstance(out, dict):
            raise FoldstreamError(f"decode {endpoint} reply: expected a JSON object")
        return out

    async def context(self, session: str, query: str | None = None, budget_chars: int | None = None,
                      budget_tokens: int | None = None, recall_turns: int | None = None, *,
                      timeout: float | None = None) -> Context:
        """The session's packed context within the budgets (None or 0: unlimited).

        With ``query`` (the live user turn or the question the model is
        about to answer) the context is question-aware: the summary, the
        memories and earlier turns that match it (``recall_turns`` at
        most), then the verbatim turns. The request is checked as the
        service checks it (ValidationError, nothing sent). An unknown
        session raises UnknownSessionError.
        """
        req: dict[str, Any] = {"session": session}
        if budget_chars:
            req["budget_chars"] = budget_chars
        elif budget_chars is not None and budget_chars < 0:
            req["budget_chars"] = budget_chars
        if budget_tokens:
            req["budget_tokens"] = budget_tokens
        elif budget_tokens is not None and budget_tokens < 0:
            req["budget_tokens"] = budget_tokens
        if query is not None:
            if query == "":
                raise ValidationError(v.CODE_INVALID_FIELD, "query",
                                      f"expected 1..{v.MAX_CONTEXT_QUERY_CHARS} characters, got none "
                                      "(pass query=None for a context without a query)")
            req["query"] = query
        if recall_turns:
            req["recall_turns"] = recall_turns
        elif recall_turns is not None and recall_turns < 0:
            req["recall_turns"] = recall_turns
        v.check_context_request(req)
        return Context.from_json(await self._request("context", req, timeout))

    async def session(self, session: str, *, timeout: float | None = None) -> SessionInfo:
        """The session's checkpointed state, with how far the processor is behind the stream."""
        v.check_session("session", session)
        return SessionInfo.from_json(await self._request("session", {"session": session}, timeout))

    async def recall(self, session: str, query: str, *, limit: int | None = None,
                     scope: Literal["evicted", "all"] | None = None, timeout: float | None = None) -> Recall:
        """The session's turns that best match query, best first.

        scope "evicted" (the default) searches the turns before the
        cursor, "all" every turn since the last reset; limit is 1..50
        (default 10).
        """
        req: dict[str, Any] = {"v": v.WIRE_VERSION, "session": session, "query": query}
        if limit is not None:
            req["limit"] = limit
        if scope is not None:
            req["scope"] = scope
        v.check_recall_request(req)
        return Recall.from_json(await self._request("recall", req, timeout))

    async def wait_caught_up(self, session: str, *, timeout: float = 10.0, poll: float = 0.02) -> SessionInfo:
        """Wait until the processor has applied every event this client published to session.

        It compares the stream sequence of this client's last
        acknowledged event with the session's state (applied_seq, or
        caught_up once the stream holds it), so that a context asked for
        next includes everything published before (the client remembers
        the 100,000 sessions it published to most recently; for a session
        it never published to, it waits until the processor knows the
        session and is caught up). Raises RequestTimeoutError after
        timeout seconds.
        """
        target = self._acked.get(session, 0)
        deadline = time.monotonic() + timeout
        last: SessionInfo | None = None
        while True:
            try:
                last = await self.session(session)
                if (target and last.applied_seq >= target) or (last.caught_up and last.stream_last_seq >= target):
                    return last
            except UnknownSessionError:
                pass  # the processor has not applied the session's first event yet
            if time.monotonic() >= deadline:
                where = f"applied seq {last.applied_seq}" if last else "no checkpoint yet"
                raise RequestTimeoutError(f"session {session}: the processor has not caught up with stream seq "
                                          f"{target} within {timeout:g}s ({where})")
            await asyncio.sleep(poll)

    def watch_summaries(self, session: str, *, start: Literal["latest", "new"] = "latest",
                        heartbeat: float = 5.0, flow_control: bool = False) -> SummaryWatch:
        """An async iterable over the session's summary-updated events, in stream order.

        ``start="latest"`` begins with the newest summary (if any),
        ``"new"`` with the next one. It reads the outbound stream through
        an ordered push consumer that is recreated from the last
        delivered sequence after a gap, a lost heartbeat or a reconnect:
        no gaps, no duplicates. ``async with`` creates the consumer on
        entry and deletes it on exit (``await watch.start()`` and
        ``await watch.aclose()`` do the same); otherwise the first
        iteration creates it. Leaving an ``async for`` over it (break, an
        exception) or closing the client ends the watch and deletes its
        consumer (``await anext(watch)`` reads one event without that).
        ``flow_control=True`` asks for JetStream flow
        control (it needs permission to publish to ``$JS.FC.>``, which the
        shipped builder role does not have).
        """
        v.check_session("session", session)
        if start not in ("latest", "new"):
            raise ValueError(f'start: expected "latest" or "new", got {start!r}')
        if heartbeat <= 0:
            raise ValueError(f"heartbeat: expected a positive number of seconds, got {heartbeat}")
        return SummaryWatch(self._conn, stream=self.out_stream, subject=f"{self.prefix}.out.{session}.summary",
                            start=start, heartbeat=heartbeat, request_timeout=self.request_timeout,
                            on_error=self._on_error, flow_control=flow_control)

