"""Summary watch: an ordered push consumer on the outbound stream.

The consumer is ephemeral (memory storage, no acks, an idle heartbeat)
and filtered on one session's summary subject. The watch remembers the
stream sequence of the last event it returned and the consumer sequence
of the last message it received; a gap in the consumer sequence, a
heartbeat that names a later consumer sequence, missed heartbeats or a
reconnect make it create a new consumer that starts at the next stream
sequence. So no event is skipped and none is returned twice.

Flow control is off by default: the shipped builder permissions
(nats/auth) do not allow publishing to $JS.FC.>, and summary events are
few and small; ``flow_control=True`` turns it on where that is allowed.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ._transport import Connection, Msg, new_token
from .errors import FoldstreamError
from .types import SummaryUpdated

__all__ = ["SummaryWatch"]


def _ack_seqs(reply: str) -> tuple[int, int] | None:
    """(stream seq, consumer seq) from a $JS.ACK reply subject (v1 or v2 form)."""
    t = reply.split(".")
    if len(t) < 9 or t[0] != "$JS" or t[1] != "ACK":
        return None
    try:
        if len(t) == 9:
            return int(t[5]), int(t[6])
        return int(t[7]), int(t[8])
    except ValueError:
        return None


class SummaryWatch:
    """Async iterable of a session's SummaryUpdated events (see Client.watch_summaries).

    Leaving an ``async for`` over it (break, an exception) closes it, as
    aclose() does; so does closing the client: the iteration ends.
    """

    def __init__(self, conn: Connection, *, stream: str, subject: str, start: str, heartbeat: float,
                 request_timeout: float, on_error: Callable[[Exception], None] | None,
                 flow_control: bool = False) -> None:
        self._conn = conn
        self._stream = stream
        self._subject = subject
        self._start = start
        self._hb = heartbeat
        self._fc = flow_control
        self._timeout = request_timeout
        self._on_error = on_error
        self._queue: asyncio.Queue[tuple[int, Msg | None]] = asyncio.Queue()
        self._gen = 0
        self._sid: int | None = None
        self._consumer = ""
        self._last_sseq = 0
        self._last_dseq = 0
        self._activity = time.monotonic()
        self._need_reset = True
        self._closed = False
        self._backoff = 0.1
        self.resets = 0  # consumers created after the first (observability, tests)
        conn.add_status_listener(self._on_status)

    @property
    def last_stream_seq(self) -> int:
        """The stream sequence of the last event returned (0: none yet)."""
        return self._last_sseq

    def _on_status(self, status: str) -> None:
        if status == "reconnected":
            self._need_reset = True
        elif status == "closed":
            self._release()  # the connection will not come back: the iteration ends now
        self._queue.put_nowait((-1, None))  # wake the reader

    def _release(self) -> None:
        """Stop listening to the connection and drop the consumer (once)."""
        if self._closed:
            return
        self._closed = True
        self._conn.remove_status_listener(self._on_status)
        self._drop_consumer()

    def _report(self, err: Exception) -> None:
        if self._on_error is not None:
            try:
                self._on_error(err)
            except Exception:
                pass

    def _drop_consumer(self) -> None:
        if self._sid is not None:
            self._conn.unsubscribe(self._sid)
            self._sid = None
        if self._consumer and self._conn.is_connected:
            name, self._consumer = self._consumer, ""

            async def delete() -> None:
                try:
                    await self._conn.request(f"$JS.API.CONSUMER.DELETE.{self._stream}.{name}", b"", 2.0)
                except FoldstreamError:
                    pass  # its inactive threshold removes it anyway

            asyncio.ensure_future(delete())
        self._consumer = ""

    async def _create(self) -> None:
        if self._gen > 0:
            self.resets += 1
        self._drop_consumer()
        self._gen += 1
        gen = self._gen
        deliver = self._conn.new_inbox()
        q = self._queue
        self._sid = self._conn.subscribe(deliver, lambda m: q.put_nowait((gen, m)))
        name = new_token()
        cfg: dict[str, Any] = {
            "name": name, "deliver_subject": deliver, "ack_policy": "none", "max_deliver": 1,
            "filter_subject": self._subject, "idle_heartbeat": int(self._hb * 1e9), "flow_control": self._fc,
            "inactive_threshold": int(max(30.0, self._hb * 4) * 1e9), "mem_storage": True, "num_replicas": 1,
            "replay_policy": "instant",
        }
        if self._last_sseq > 0:
            cfg["deliver_policy"] = "by_start_sequence"
            cfg["opt_start_seq"] = self._last_sseq + 1
        else:
            cfg["deliver_policy"] = "last" if self._start == "latest" else "new"
        api = f"$JS.API.CONSUMER.CREATE.{self._stream}.{name}.{self._subject}"
        body = json.dumps({"stream_name": self._stream, "config": cfg}).encode()
        msg = await self._conn.request(api, body, self._timeout)
        d = json.loads(msg.data or b"{}")
        if d.get("error"):
            e = d["error"]
            raise FoldstreamError(f"watch {self._subject}: creating a consumer on stream {self._stream}: "
                                  f"{e.get('description', e)} (JetStream error {e.get('err_code', e.get('code'))})")
        if self._last_sseq == 0 and self._start == "new":
            # Start later resets after what this consumer began with, so a
            # summary published between two consumers is not missed.
            self._last_sseq = int(d.get("delivered", {}).get("stream_seq", 0))
        self._consumer = name
        self._last_dseq = 0
        self._activity = time.monotonic()
        self._need_reset = False
        self._backoff = 0.1

    def __aiter__(self) -> AsyncIterator[SummaryUpdated]:
        return self._events()

    async def _events(self) -> AsyncIterator[SummaryUpdated]:
        # An async generator: leaving an `async for` (break, an exception)
        # finalizes it, which closes the watch (its consumer is deleted).
        try:
            while True:
                try:
                    ev = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield ev
        finally:
            await self.aclose()

    async def __anext__(self) -> SummaryUpdated:
        while True:
            if self._closed:
                raise StopAsyncIteration
            if self._need_reset:
                if not self._conn.is_connected:
                    if self._conn.closed:
                        self._closed = True
                        raise StopAsyncIteration
                    await self._wait(self._backoff)
                    continue
                try:
                    await self._create()
                except (FoldstreamError, ValueError) as e:
                    self._report(e)
                    await asyncio.sleep(self._backoff)
                    self._backoff = min(self._backoff * 2, 2.0)
                    continue
            remaining = self._activity + 2 * self._hb - time.monotonic()
            if remaining <= 0:
                self._report(FoldstreamError(f"watch {self._subject}: no heartbeat for {2 * self._hb:g}s; "
                                             "recreating the consumer"))
                self._need_reset = True
                continue
            try:
                gen, msg = await asyncio.wait_for(self._queue.get(), remaining)
            except asyncio.TimeoutError:
                continue
            if gen != self._gen or msg is None:
                continue
            self._activity = time.monotonic()
            if msg.status:
                if msg.status == "100":
                    if msg.reply and "flow" in msg.description.lower():
                        self._conn.publish(msg.reply)  # a flow control request
                    stalled = msg.headers.get("Nats-Consumer-Stalled")
                    if stalled:
                        self._conn.publish(stalled)  # a heartbeat naming an unanswered one
                    last = msg.headers.get("Nats-Last-Consumer")
                    if last is not None and last.isdigit() and int(last) != self._last_dseq:
                        self._need_reset = True  # a message was lost between two heartbeats
                    continue
                self._need_reset = True  # 409 consumer deleted and the like
                continue
            seqs = _ack_seqs(msg.reply)
            if seqs is None:
                continue
            sseq, dseq = seqs
            if dseq != self._last_dseq + 1:
                self._need_reset = True
                continue
            self._last_dseq = dseq
            if sseq <= self._last_sseq:
                continue
            try:
                d = json.loads(msg.data)
                if not isinstance(d, dict):
                    raise ValueError("expected a JSON object")
            except ValueError as e:
                self._last_sseq = sseq
                self._report(FoldstreamError(f"watch {self._subject}: undecodable summary-updated skipped: {e}"))
                continue
            self._last_sseq = sseq
            return SummaryUpdated.from_json(d, sseq)

    async def _wait(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._queue.get(), seconds)
        except asyncio.TimeoutError:
            pass

    async def aclose(self) -> None:
        """Stop watching: unsubscribe and delete the consumer."""
        if self._closed:
            return
        self._release()
        self._queue.put_nowait((-1, None))

    async def start(self) -> SummaryWatch:
        """Create the consumer now (else the first iteration does): events from here on are delivered."""
        if self._need_reset and not self._closed:
            await self._create()
        return self

    async def __aenter__(self) -> SummaryWatch:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
