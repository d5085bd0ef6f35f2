/**
 * The foldstream client: one object for a bot (publish turns, notes and
 * control events) and a prompt builder (context, session, recall, summary
 * watch) over one NATS connection.
 *
 * @module
 */

import { connect as natsConnect, errors as natsErrors, nuid } from "@nats-io/transport-node";
import type { NatsConnection, NodeConnectionOptions, Msg } from "@nats-io/transport-node";
import { jetstream, DeliverPolicy } from "@nats-io/jetstream";
import type { JetStreamClient } from "@nats-io/jetstream";

import {
  BadRequestError,
  ClosedError,
  FoldstreamError,
  InboxPermissionError,
  InternalServiceError,
  NoRespondersError,
  PublishBatchError,
  ServiceError,
  TimeoutError,
  UnavailableError,
  UnknownSessionError,
  ValidationError,
} from "./errors.js";
import type { UnackedEvent } from "./errors.js";
import { AckInbox } from "./acks.js";
import type { Ack } from "./acks.js";
import { Context } from "./context.js";
import {
  DEFAULT_LIMITS,
  checkSession,
  contextRequest,
  prepareControl,
  prepareNote,
  prepareTurn,
  recallRequest,
} from "./validate.js";
import type { ContextOptions, Limits, NoteInput, Op, RecallOptions, TurnInput } from "./validate.js";
import type { RecallResponse, SessionConfig, SessionReply, SummaryUpdated } from "./wire.js";

/** The default subject prefix (the processor's --prefix). */
export const DEFAULT_PREFIX = "fold";
/** The NATS micro service name of the processor's request-reply service. */
export const SERVICE_NAME = "foldstream";

/** Options of the client itself, for {@link connect} and {@link FoldstreamClient.wrap}. */
export interface ClientOptions {
  /** The subject prefix (the processor's --prefix; default "fold"). */
  prefix?: string;
  /** Milliseconds a service request waits for its answer (default 5000). */
  requestTimeout?: number;
  /** Milliseconds a publish waits for the stream's acknowledgement (default 10000). */
  ackTimeout?: number;
  /** Publishes of a batch in flight at once (default 256). */
  maxPending?: number;
  /** The processor's size limits, if it runs with non-default ones. */
  limits?: Partial<Limits>;
  /**
   * The reply-inbox prefix the NATS server lets this user read. The
   * shipped auth configs (nats/auth) allow each user only its own,
   * `_INBOX_<user>`; a connection on the default `_INBOX` is refused there.
   * {@link connect} opens the connection with it; {@link FoldstreamClient.wrap}
   * checks that the connection uses it.
   */
  inboxPrefix?: string;
  /**
   * Receives the errors nothing else can return: a summary update that
   * does not decode, which {@link FoldstreamClient.watchSummaries} skips.
   * An error it throws is ignored.
   */
  onError?: (err: Error) => void;
}

/** Options of {@link connect}: the client's, plus nats.js's connection options (servers, user, pass, token, authenticator, tls, …). */
export type ConnectOptions = ClientOptions & Omit<NodeConnectionOptions, "inboxPrefix">;

/** Where {@link FoldstreamClient.watchSummaries} begins. */
export type WatchStart = "latest" | "new";

/** Options of {@link FoldstreamClient.watchSummaries}. */
export interface WatchOptions {
  /** "latest" (default): the newest summary first, if any, then every new one; "new": only those published after the watch starts. */
  from?: WatchStart;
  /** Ends the watch (the iterator then returns). */
  signal?: AbortSignal;
}

/** What the stream said about a published event. */
export interface Published {
  /** The inbound stream's sequence of the event. */
  seq: number;
  /** True when the stream already held it (same session and turn_id within its duplicate window): stored once. */
  duplicate: boolean;
}

/** What {@link FoldstreamClient.publishTurns} reports when every event was acknowledged. */
export interface BatchResult {
  /** Events acknowledged (duplicates included). */
  acked: number;
  /** Of those, how many the stream already held. */
  duplicates: number;
}

/** The Nats-Msg-Id of a turn: "<session>:<turn_id>", so that a re-published turn is stored once. */
export function turnMsgId(session: string, turnId: string): string {
  return `${session}:${turnId}`;
}

/** The Nats-Msg-Id of a note: "<session>:note:<note_id>". */
export function noteMsgId(session: string, noteId: string): string {
  return `${session}:note:${noteId}`;
}

/** A stream's name from the prefix, as the processor derives it ("fold" → FOLD_IN, FOLD_OUT). */
export function streamName(prefix: string, suffix: "IN" | "OUT"): string {
  return prefix.replace(/[.-]/g, "_").toUpperCase() + "_" + suffix;
}

function checkInboxPrefix(prefix: string): void {
  if (prefix.split(".").some((tok) => tok === "" || /[*> \t\r\n]/.test(tok))) {
    throw new FoldstreamError(
      `foldstream: inboxPrefix: expected subject tokens without wildcards, spaces or empty tokens, e.g. _INBOX_bot, got ${JSON.stringify(prefix)}`,
    );
  }
}

function causes(err: unknown): unknown[] {
  const out: unknown[] = [];
  for (let e = err; e !== undefined && e !== null && out.length < 8; e = (e as { cause?: unknown }).cause) out.push(e);
  return out;
}

/**
 * Opens a NATS connection and returns a client on it; {@link FoldstreamClient.close}
 * closes both. With the shipped auth configs pass `user`/`pass` (or
 * `token`, `authenticator`) and `inboxPrefix: "_INBOX_<user>"`: a server
 * that refuses the connection's reply inbox is reported here, at once, as
 * an {@link InboxPermissionError} naming the prefix to set.
 *
 * ```ts
 * const fs = await connect({ servers: "nats://127.0.0.1:4222" });
 * await fs.publishTurn({ session: "s1", turn_id: "t1", speaker: "Alice", text: "Hi" });
 * ```
 */
export async function connect(opts: ConnectOptions = {}): Promise<FoldstreamClient> {
  const { prefix, requestTimeout, ackTimeout, maxPending, limits, inboxPrefix, onError, ...natsOpts } = opts;
  if (inboxPrefix !== undefined) checkInboxPrefix(inboxPrefix);
  const nc = await natsConnect({ name: "foldstream-ts", ...natsOpts, ...(inboxPrefix ? { inboxPrefix } : {}) });
  const clientOpts: ClientOptions = { prefix, requestTimeout, ackTimeout, maxPending, limits, inboxPrefix, onError };
  const c = new FoldstreamClient(nc, clientOpts, true, typeof natsOpts.user === "string" ? natsOpts.user : undefined);
  try {
    await c.checkInbox();
  } catch (err) {
    await nc.close();
    throw err;
  }
  return c;
}

/**
 * The client. It is safe to use from concurrent async code. Every event is
 * validated before it is sent (a {@link ValidationError} names the field),
 * turns carry Nats-Msg-Id "<session>:<turn_id>", and every service answer
 * that is not a reply is an error of its own class.
 */
export class FoldstreamClient {
  /** The NATS connection. */
  readonly nc: NatsConnection;
  /** The subject prefix. */
  readonly prefix: string;
  private readonly js: JetStreamClient;
  private readonly requestTimeout: number;
  private readonly ackTimeout: number;
  private readonly maxPending: number;
  private readonly limits: Limits;
  private readonly ownsConnection: boolean;
  private readonly user: string | undefined;
  private readonly inboxPrefix: string;
  private readonly onError: ((err: Error) => void) | undefined;
  private readonly acks: AckInbox;
  private readonly published = new Map<string, number>();
  private closed = false;

  /** Use {@link connect} or {@link FoldstreamClient.wrap}. */
  constructor(nc: NatsConnection, opts: ClientOptions, ownsConnection: boolean, user?: string) {
    this.nc = nc;
    this.prefix = opts.prefix ?? DEFAULT_PREFIX;
    if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(this.prefix)) {
      throw new FoldstreamError(`foldstream: prefix: expected subject tokens of [A-Za-z0-9_-], got ${JSON.stringify(this.prefix)}`);
    }
    this.requestTimeout = opts.requestTimeout ?? 5000;
    this.ackTimeout = opts.ackTimeout ?? 10000;
    this.maxPending = opts.maxPending ?? 256;
    if (!(this.maxPending >= 1)) throw new FoldstreamError(`foldstream: maxPending: expected at least 1, got ${this.maxPending}`);
    this.limits = { ...DEFAULT_LIMITS, ...(opts.limits ?? {}) };
    this.ownsConnection = ownsConnection;
    this.user = user;
    this.onError = opts.onError;
    this.inboxPrefix = (nc as unknown as { options?: { inboxPrefix?: string } }).options?.inboxPrefix || "_INBOX";
    this.js = jetstream(nc, { timeout: this.ackTimeout });
    this.acks = new AckInbox(nc, this.inboxPrefix, this.ackTimeout,
      `no stream stores it (is the processor provisioned with prefix "${this.prefix}"?)`,
      (err) => this.natsError(err, this.inboxPrefix, this.ackTimeout, "the reply inbox"));
  }

  /**
   * A client on a connection the caller opened (and closes). With
   * `inboxPrefix`, a connection opened with another prefix is refused at
   * once, naming the option to use.
   */
  static wrap(nc: NatsConnection, opts: ClientOptions = {}): FoldstreamClient {
    const c = new FoldstreamClient(nc, opts, false);
    if (opts.inboxPrefix !== undefined) {
      checkInboxPrefix(opts.inboxPrefix);
      if (c.inboxPrefix !== opts.inboxPrefix) {
        throw new FoldstreamError(
          `foldstream: inboxPrefix: the NATS connection's inbox prefix is ${JSON.stringify(c.inboxPrefix)}, expected ${JSON.stringify(opts.inboxPrefix)}: ` +
            `connect with { inboxPrefix: ${JSON.stringify(opts.inboxPrefix)} }`,
        );
      }
    }
    return c;
  }

  /**
   * Subscribes under the connection's inbox prefix and waits for the
   * server's answer: a server whose permissions refuse it is reported now,
   * as an InboxPermissionError, rather than as a failed first publish.
   */
  async checkInbox(): Promise<void> {
    const subject = `${this.inboxPrefix}.foldstream-check.${nuid.next()}`;
    const sub = this.nc.subscribe(subject);
    let refused: unknown;
    sub.closed.then((v) => { refused = v; }, (e: unknown) => { refused = e ?? true; });
    await this.nc.flush();
    await new Promise((resolve) => setImmediate(resolve));
    if (refused !== undefined || sub.isClosed()) {
      throw this.inboxError(subject, refused instanceof Error ? refused : undefined);
    }
    sub.unsubscribe();
  }

  private inboxError(subject: string, cause?: Error): InboxPermissionError {
    return new InboxPermissionError(subject, this.user ? `_INBOX_${this.user}` : "_INBOX_<user>", cause ? { cause } : undefined);
  }

  /** Turns a NATS error into the client's, naming what was asked. */
  private natsError(err: unknown, subject: string, timeoutMs: number, what: string): Error {
    for (const e of causes(err)) {
      if (e instanceof natsErrors.PermissionViolationError && e.operation === "subscription" && e.subject.startsWith(this.inboxPrefix + ".")) {
        return this.inboxError(e.subject, e);
      }
      if (e instanceof natsErrors.NoRespondersError || (e instanceof natsErrors.RequestError && e.isNoResponders())) {
        return new NoRespondersError(subject, what, { cause: err });
      }
      if (e instanceof natsErrors.TimeoutError) return new TimeoutError(subject, timeoutMs, { cause: err });
      if (e instanceof natsErrors.ClosedConnectionError) return new ClosedError();
    }
    if (err instanceof FoldstreamError) return err;
    return new FoldstreamError(`foldstream: ${subject}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }

  private ensureOpen(): void {
    if (this.closed || this.nc.isClosed()) throw new ClosedError();
  }

  private inSubject(session: string, kind: "turn" | "note" | "control"): string {
    return `${this.prefix}.in.${session}.${kind}`;
  }

  private encode(subject: string, v: unknown): Uint8Array {
    const data = new TextEncoder().encode(JSON.stringify(v));
    if (data.length > this.limits.maxPayloadBytes) {
      throw new ValidationError("payload", "oversized", `${data.length} bytes, expected at most ${this.limits.maxPayloadBytes} (event for ${subject})`);
    }
    return data;
  }

  /** Records the highest stream sequence acknowledged for the session (for {@link FoldstreamClient.waitCaughtUp}). */
  private acked(session: string, ack: Ack): void {
    if (ack.seq > (this.published.get(session) ?? 0)) this.published.set(session, ack.seq);
  }

  private async publishMsg(session: string, subject: string, data: Uint8Array, msgID = ""): Promise<Published> {
    let ack: Ack;
    try {
      ack = await this.acks.request(subject, data, msgID);
    } catch (err) {
      throw this.natsError(err, subject, this.ackTimeout, `no stream stores it (is the processor provisioned with prefix "${this.prefix}"?)`);
    }
    this.acked(session, ack);
    return { seq: ack.seq, duplicate: ack.duplicate };
  }

  /**
   * Validates a turn and publishes it, waiting for the stream's
   * acknowledgement. "role" defaults to "user", "at" to now. A turn already
   * stored (same session and turn_id within the stream's duplicate window)
   * is acknowledged as a duplicate and not stored again.
   *
   * @throws {@link ValidationError} naming the field, before anything is sent.
   */
  async publishTurn(turn: TurnInput): Promise<Published> {
    this.ensureOpen();
    const wire = prepareTurn(turn, this.limits);
    const subject = this.inSubject(wire.session, "turn");
    return this.publishMsg(wire.session, subject, this.encode(subject, wire), turnMsgId(wire.session, wire.turn_id));
  }

  /**
   * Publishes turns, at most `maxPending` in flight, and waits for every
   * acknowledgement. Every turn is validated first: an invalid one is a
   * {@link ValidationError} (its `index` says which) and nothing is sent.
   * Turns the stream did not acknowledge (a lost connection, a timeout)
   * are listed by the {@link PublishBatchError} thrown at the end; after
   * the first of them the rest of the batch is not sent and is listed too.
   * Publishing them again is safe: a turn stored after all is stored once.
   */
  async publishTurns(turns: readonly TurnInput[]): Promise<BatchResult> {
    this.ensureOpen();
    const prepared = turns.map((t, index) => {
      try {
        const wire = prepareTurn(t, this.limits);
        const subject = this.inSubject(wire.session, "turn");
        return { wire, subject, data: this.encode(subject, wire) };
      } catch (err) {
        if (err instanceof ValidationError) throw new ValidationError(err.field, err.code, err.reason, index);
        throw err;
      }
    });
    const unacked: UnackedEvent[] = [];
    let acked = 0;
    let duplicates = 0;
    let next = 0;
    let inFlight = 0;
    // After the first failure (a lost connection, a timeout) nothing more is
    // sent: the rest is reported as not acknowledged at once instead of
    // each waiting out its own timeout.
    let stopped: Error | undefined;
    await new Promise<void>((resolve) => {
      const fail = (index: number, error: Error) => {
        const w = prepared[index]!.wire;
        unacked.push({ index, session: w.session, turn_id: w.turn_id, error });
      };
      // Keeps maxPending publishes in flight. It runs again from each
      // acknowledgement's callback, so that the publishes refilling the
      // window after a read of many acks leave together in one write.
      const pump = () => {
        while (inFlight < this.maxPending && next < prepared.length) {
          const index = next++;
          const p = prepared[index]!;
          if (stopped) {
            fail(index, new FoldstreamError(`foldstream: not sent: the batch stopped at the first unacknowledged turn (${stopped.message})`, { cause: stopped }));
            continue;
          }
          try {
            this.acks.publish(p.subject, p.data, turnMsgId(p.wire.session, p.wire.turn_id), (err, ack) => {
              inFlight--;
              if (err) {
                const e = this.natsError(err, p.subject, this.ackTimeout, `no stream stores it (is the processor provisioned with prefix "${this.prefix}"?)`);
                stopped ??= e;
                fail(index, e);
              } else {
                acked++;
                if (ack!.duplicate) duplicates++;
                this.acked(p.wire.session, ack!);
              }
              pump();
            });
            inFlight++;
          } catch (err) {
            const e = this.natsError(err, p.subject, this.ackTimeout, "");
            stopped ??= e;
            fail(index, e);
          }
        }
        if (inFlight === 0 && next >= prepared.length) resolve();
      };
      pump();
    });
    if (unacked.length > 0) {
      unacked.sort((a, b) => a.index - b.index);
      throw new PublishBatchError(unacked, acked);
    }
    return { acked, duplicates };
  }

  /**
   * Validates a screen-watch or visual note and publishes it, waiting for
   * the acknowledgement (Nats-Msg-Id "<session>:note:<note_id>").
   */
  async publishNote(note: NoteInput): Promise<Published> {
    this.ensureOpen();
    const wire = prepareNote(note, this.limits);
    const subject = this.inSubject(wire.session, "note");
    return this.publishMsg(wire.session, subject, this.encode(subject, wire), noteMsgId(wire.session, wire.note_id));
  }

  /**
   * Publishes a control event: "generate", "compact", "end", "reset", or
   * "configure" with its settings. Control events carry no Nats-Msg-Id:
   * asking twice is asking twice.
   */
  async control(session: string, op: Op, config?: SessionConfig): Promise<Published> {
    this.ensureOpen();
    const wire = prepareControl(session, op, config);
    const subject = this.inSubject(session, "control");
    return this.publishMsg(session, subject, this.encode(subject, wire));
  }

  /** Sends a service request and decodes the reply, or throws the answer's error class. */
  private async request<T>(endpoint: string, body: unknown, timeout?: number): Promise<T> {
    this.ensureOpen();
    const subject = `${this.prefix}.svc.${endpoint}`;
    const ms = timeout ?? this.requestTimeout;
    let msg: Msg;
    try {
      msg = await this.nc.request(subject, JSON.stringify(body), { timeout: ms });
    } catch (err) {
      throw this.natsError(err, subject, ms, "no foldstream service answers (is the processor running with --service?)");
    }
    const code = msg.headers?.get("Nats-Service-Error-Code") ?? "";
    if (code !== "") {
      const desc = msg.headers?.get("Nats-Service-Error") ?? "";
      switch (code) {
        case "400": throw new BadRequestError(endpoint, desc);
        case "404": throw new UnknownSessionError(endpoint, desc);
        case "503": throw new UnavailableError(endpoint, desc);
        case "500": throw new InternalServiceError(endpoint, desc);
        default: throw new ServiceError(endpoint, code, desc);
      }
    }
    try {
      return msg.json<T>();
    } catch (err) {
      throw new FoldstreamError(`foldstream ${endpoint}: undecodable reply`, { cause: err });
    }
  }

  /**
   * The session's packed context: the summary and the verbatim turns from
   * the cursor (newest kept first within a budget); with a query, also the
   * remembered facts and earlier turns that match it. `messages()` and
   * `text()` render it.
   *
   * @throws {@link ValidationError} for a request the service would refuse, {@link UnknownSessionError} (404),
   *   {@link BadRequestError} (400), {@link UnavailableError} (503), {@link TimeoutError}, {@link NoRespondersError}.
   */
  async context(session: string, opts: ContextOptions = {}): Promise<Context> {
    const body = contextRequest(session, opts);
    return new Context(await this.request("context", body, opts.timeout));
  }

  /** The session's checkpointed state, and how far it is behind the inbound stream (`caught_up`). */
  async session(session: string, opts: { timeout?: number } = {}): Promise<SessionReply> {
    checkSession("session", session);
    return this.request<SessionReply>("session", { session }, opts.timeout);
  }

  /** The session's turns that best match a query, best first; by default among those before the cursor (folded or evicted). */
  async recall(session: string, query: string, opts: RecallOptions = {}): Promise<RecallResponse> {
    const body = recallRequest(session, query, opts);
    return this.request<RecallResponse>("recall", body, opts.timeout);
  }

  /**
   * Waits until the processor has applied everything this client published
   * to the session: the session endpoint reports it caught up with a
   * stream sequence at least that of this client's last acknowledged event.
   * Polls every `interval` ms (default 20) until `timeout` ms (default
   * 30000), then throws a {@link TimeoutError}.
   */
  async waitCaughtUp(session: string, opts: { timeout?: number; interval?: number } = {}): Promise<SessionReply> {
    checkSession("session", session);
    const timeout = opts.timeout ?? 30000;
    const deadline = Date.now() + timeout;
    const want = this.published.get(session) ?? 0;
    let last: SessionReply | undefined;
    for (;;) {
      try {
        const s = await this.session(session, { timeout: Math.max(1, Math.min(this.requestTimeout, deadline - Date.now())) });
        if (s.caught_up && s.stream_last_seq >= want && !s.lease) return s;
        last = s;
      } catch (err) {
        if (!(err instanceof UnknownSessionError) && !(err instanceof TimeoutError)) throw err;
      }
      if (Date.now() >= deadline) {
        const where = last ? `applied seq ${last.applied_seq}, stream seq ${last.stream_last_seq}${last.lease ? ", a fold in flight" : ""}` : "no checkpoint yet";
        throw new TimeoutError(`${this.prefix}.svc.session`, timeout, undefined,
          `session ${session}: the processor has not caught up with stream seq ${want} (${where})`);
      }
      await new Promise((r) => setTimeout(r, opts.interval ?? 20));
    }
  }

  /**
   * The session's summary updates, in version order, through an ordered
   * consumer on the outbound stream: after a reconnect it resumes from the
   * last update it delivered, without gaps or duplicates. An update that
   * is not a JSON object is skipped and reported to the client's
   * `onError`; the watch goes on. Ends when `signal` aborts, the loop
   * breaks, or the client closes.
   */
  async *watchSummaries(session: string, opts: WatchOptions = {}): AsyncGenerator<SummaryUpdated, void, undefined> {
    this.ensureOpen();
    checkSession("session", session);
    const from = opts.from ?? "latest";
    if (from !== "latest" && from !== "new") {
      throw new ValidationError("from", "invalid_field", `expected "latest" or "new", got ${JSON.stringify(from)}`);
    }
    const subject = `${this.prefix}.out.${session}.summary`;
    const stream = streamName(this.prefix, "OUT");
    let messages;
    try {
      const consumer = await this.js.consumers.get(stream, {
        filter_subjects: subject,
        deliver_policy: from === "latest" ? DeliverPolicy.Last : DeliverPolicy.New,
      });
      // Pulls expire after 5 s (the library's default is 30 s): a pull left waiting across a reconnect is renewed
      // within seconds, where a summary published just after the reconnect could otherwise wait 30 s or more.
      messages = await consumer.consume({ expires: 5000 });
    } catch (err) {
      throw this.natsError(err, subject, this.requestTimeout, `stream ${stream} is not there (is the processor running with prefix "${this.prefix}"?)`);
    }
    const stop = () => messages.stop();
    opts.signal?.addEventListener("abort", stop, { once: true });
    try {
      if (opts.signal?.aborted) return;
      for await (const m of messages) {
        let ev: unknown;
        try {
          ev = m.json<unknown>();
          if (ev === null || typeof ev !== "object" || Array.isArray(ev)) throw new Error("expected a JSON object");
        } catch (err) {
          this.report(new FoldstreamError(
            `foldstream: watch ${subject}: undecodable summary-updated skipped: ${err instanceof Error ? err.message : String(err)}`, { cause: err }));
          continue;
        }
        yield ev as SummaryUpdated;
      }
    } finally {
      opts.signal?.removeEventListener("abort", stop);
      messages.stop();
    }
  }

  /** Hands an error nothing else can return to onError, if set. */
  private report(err: Error): void {
    try {
      this.onError?.(err);
    } catch {
      // The handler's own failure is not the watch's.
    }
  }

  /** Closes the client and, when {@link connect} opened it, the NATS connection (after sending what is buffered). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (!this.ownsConnection || this.nc.isClosed()) {
      this.acks.close();
      return;
    }
    try {
      await this.nc.drain();
    } catch {
      // Disconnected (nothing buffered can be sent now): close at once.
      await this.nc.close();
    }
    this.acks.close();
  }

  /** `await using fs = await connect(…)` closes it at the end of the scope. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
