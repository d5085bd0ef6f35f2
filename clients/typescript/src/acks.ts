/**
 * JetStream publishes with their acknowledgements awaited, on one reply
 * subscription per client.
 *
 * A JetStream publish is a core NATS publish to the stream's subject with
 * a reply subject: the stream answers there with its PubAck
 * (`{"stream":…,"seq":…,"duplicate":…}` or `{"error":{…}}`), or the server
 * with a 503 status when no stream stores the subject. nats.js's
 * `js.publish` makes each publish a request of its own (a reply
 * registration, a timer and an Error for its stack trace per call, and a
 * chain of promises before the next publish can go out); this sends every
 * publish with a reply subject under one wildcard subscription, matches
 * the answers by their last token, and expires them with one timer; a
 * lost connection fails every pending publish at once, as its answer
 * cannot come any more (the server sends it while the connection is
 * down). An
 * answer is handed to a callback synchronously, so that a batch refills
 * its window of publishes in the same tick and they leave in one write.
 *
 * @module
 */

import { headers, nuid } from "@nats-io/transport-node";
import type { MsgHdrs, Msg, NatsConnection, Status, Subscription } from "@nats-io/transport-node";

import { ClosedError, FoldstreamError, NoRespondersError, TimeoutError } from "./errors.js";

/** The stream's acknowledgement of a published message. */
export interface Ack {
  /** The stream that stored it. */
  stream: string;
  /** Its sequence in that stream. */
  seq: number;
  /** True when the stream already held a message with its Nats-Msg-Id. */
  duplicate: boolean;
}

/** Called once per publish: with the acknowledgement, or with why there is none. */
export type AckCallback = (err: Error | undefined, ack: Ack | undefined) => void;

interface Pending {
  subject: string;
  deadline: number;
  done: AckCallback;
}

const decoder = new TextDecoder();

/** Decodes a stream's answer to a publish on subject, or throws what it says instead. */
export function parseAck(subject: string, m: Msg, noStream: string): Ack {
  if (m.data.length === 0 && m.headers?.code === 503) return throwError(new NoRespondersError(subject, noStream));
  let v: { stream?: unknown; seq?: unknown; duplicate?: unknown; error?: { code?: number; err_code?: number; description?: string } };
  try {
    v = JSON.parse(decoder.decode(m.data)) as typeof v;
  } catch (err) {
    return throwError(new FoldstreamError(`foldstream: ${subject}: undecodable acknowledgement`, { cause: err }));
  }
  if (v.error) {
    return throwError(
      new FoldstreamError(
        `foldstream: ${subject}: the stream refused the event: ${v.error.description ?? "no description"} (code ${v.error.code ?? "?"}, err_code ${v.error.err_code ?? "?"})`,
      ),
    );
  }
  if (typeof v.stream !== "string" || v.stream === "" || typeof v.seq !== "number") {
    return throwError(new FoldstreamError(`foldstream: ${subject}: invalid acknowledgement ${JSON.stringify(v).slice(0, 200)}`));
  }
  return { stream: v.stream, seq: v.seq, duplicate: v.duplicate === true };
}

function throwError(err: Error): never {
  throw err;
}

/**
 * Publishes messages to streams and routes their acknowledgements back to
 * the callers. Not safe to share between connections; one per client.
 */
export class AckInbox {
  private readonly nc: NatsConnection;
  private readonly inboxPrefix: string;
  private readonly timeoutMs: number;
  private readonly noStream: string;
  /** Maps a failure of the reply subscription (a refused inbox) to the error the callers get. */
  private readonly subError: (err: Error) => Error;
  /** Pending publishes by reply token, in publish order: with one timeout for all, also deadline order. */
  private readonly pending = new Map<string, Pending>();
  private sub: Subscription | undefined;
  private base = "";
  private next = 0;
  private timer: ReturnType<typeof setInterval> | undefined;
  private status: AsyncIterable<Status> | undefined;
  private closed = false;

  /**
   * `timeoutMs` bounds the wait for each acknowledgement; `noStream` says,
   * in a NoRespondersError, what it means that no stream stores the
   * subject; `subError` turns the reply subscription's failure (the
   * server refusing the inbox) into the error every pending publish gets.
   */
  constructor(nc: NatsConnection, inboxPrefix: string, timeoutMs: number, noStream: string, subError: (err: Error) => Error) {
    this.nc = nc;
    this.inboxPrefix = inboxPrefix;
    this.timeoutMs = timeoutMs;
    this.noStream = noStream;
    this.subError = subError;
    nc.closed().then(
      () => this.close(),
      () => this.close(),
    );
  }

  /** Acknowledgements awaited. */
  get size(): number {
    return this.pending.size;
  }

  private subscribe(): void {
    if (this.status === undefined) this.watchStatus();
    this.base = `${this.inboxPrefix}.${nuid.next()}.`;
    const sub = this.nc.subscribe(`${this.base}*`, {
      callback: (err, m) => {
        if (err) return;
        this.answer(m);
      },
    });
    this.sub = sub;
    sub.closed.then(
      (err) => this.lost(sub, err instanceof Error ? err : undefined),
      (err: unknown) => this.lost(sub, err instanceof Error ? err : undefined),
    );
  }

  /** Fails every pending publish when the connection is lost: the server answered, or will answer, while it was down. */
  private watchStatus(): void {
    const status = this.nc.status();
    this.status = status;
    void (async () => {
      for await (const st of status) {
        if (this.closed) break;
        if (st.type === "disconnect" && this.pending.size > 0) {
          this.failAll(
            new FoldstreamError(
              `foldstream: the connection to the NATS server was lost before the stream's acknowledgement came (the event may be stored all the same: publishing it again is safe)`,
            ),
          );
        }
      }
    })().catch(() => undefined);
  }

  /** The reply subscription ended (refused by the server, or the connection closed): every pending publish fails. */
  private lost(sub: Subscription, err: Error | undefined): void {
    if (this.sub !== sub) return;
    this.sub = undefined;
    this.failAll(err ? this.subError(err) : new ClosedError());
  }

  private answer(m: Msg): void {
    const token = m.subject.slice(this.base.length);
    const p = this.pending.get(token);
    if (p === undefined) return; // timed out already
    this.pending.delete(token);
    let ack: Ack;
    try {
      ack = parseAck(p.subject, m, this.noStream);
    } catch (err) {
      p.done(err as Error, undefined);
      return;
    }
    p.done(undefined, ack);
  }

  /**
   * Publishes data to subject with Nats-Msg-Id msgID (none when empty)
   * and calls done once, with the stream's acknowledgement or the error
   * (no stream stores the subject, the stream refused it, no answer within
   * the timeout, the connection closed). done is called from the
   * connection's message handler and must not throw.
   *
   * @throws what nats.js throws when the message cannot be sent at all
   *   (the connection is closed, the payload is over the server's
   *   max_payload); done is not called then.
   */
  publish(subject: string, data: Uint8Array, msgID: string, done: AckCallback): void {
    if (this.closed) throw new ClosedError();
    if (this.sub === undefined) this.subscribe();
    const token = (this.next++).toString(36);
    let hdrs: MsgHdrs | undefined;
    if (msgID) {
      hdrs = headers();
      hdrs.append("Nats-Msg-Id", msgID);
    }
    this.nc.publish(subject, data, { reply: this.base + token, headers: hdrs });
    this.pending.set(token, { subject, deadline: Date.now() + this.timeoutMs, done });
    this.timer ??= setInterval(() => this.expire(), Math.max(5, Math.min(250, this.timeoutMs / 10)));
  }

  /** Publishes and resolves with the acknowledgement; see {@link AckInbox.publish}. */
  request(subject: string, data: Uint8Array, msgID: string): Promise<Ack> {
    return new Promise((resolve, reject) => {
      this.publish(subject, data, msgID, (err, ack) => (err ? reject(err) : resolve(ack!)));
    });
  }

  /** Fails the publishes whose deadline has passed. */
  private expire(): void {
    const now = Date.now();
    for (const [token, p] of this.pending) {
      if (p.deadline > now) break;
      this.pending.delete(token);
      p.done(new TimeoutError(p.subject, this.timeoutMs), undefined);
    }
    if (this.pending.size === 0) this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private failAll(err: Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    this.stopTimer();
    for (const p of all) p.done(err, undefined);
  }

  /** Stops: every pending publish fails with a ClosedError, and the reply subscription ends. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    // nats.js's status iterator has stop() (a QueuedIterator), though
    // status() is typed as a plain AsyncIterable.
    (this.status as { stop?: () => void } | undefined)?.stop?.();
    const sub = this.sub;
    this.sub = undefined;
    if (sub && !this.nc.isClosed()) sub.unsubscribe();
    this.failAll(new ClosedError());
  }
}
