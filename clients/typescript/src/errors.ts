/**
 * Errors of the foldstream client. Every error it throws is a
 * {@link FoldstreamError}; each answer of the service has a class of its
 * own, so that callers branch with `instanceof`.
 *
 * @module
 */

/** The base class of every error the client throws. */
export class FoldstreamError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * An event or request the processor would refuse, refused before anything
 * was sent. `field` names the JSON field ("role", "config.reset_hour",
 * "payload" for the whole message); `code` is the processor's rejection
 * code (the same as its dead letters' Foldstream-Error-Code).
 */
export class ValidationError extends FoldstreamError {
  /** The JSON field that is wrong. */
  readonly field: string;
  /** The rejection code: missing_field, invalid_field, oversized, bad_session, … */
  readonly code: string;
  /** What was expected. */
  readonly reason: string;
  /** In a batch, the index of the refused event. */
  readonly index?: number;

  constructor(field: string, code: string, reason: string, index?: number) {
    super(`${index === undefined ? "" : `event ${index}: `}field "${field}": ${reason}`);
    this.field = field;
    this.code = code;
    this.reason = reason;
    if (index !== undefined) this.index = index;
  }
}

/**
 * An error answer of the service (the NATS micro headers
 * Nats-Service-Error-Code and Nats-Service-Error). Subclasses exist for
 * every code the service sends.
 */
export class ServiceError extends FoldstreamError {
  /** The code: "400", "404", "500" or "503". */
  readonly code: string;
  /** The service's description. */
  readonly description: string;
  /** The endpoint that answered: context, session or recall. */
  readonly endpoint: string;

  constructor(endpoint: string, code: string, description: string) {
    super(`foldstream ${endpoint}: ${code} ${description}`);
    this.endpoint = endpoint;
    this.code = code;
    this.description = description;
  }
}

/** 400: the service refused the request; `field` names the field it refused, when it says. */
export class BadRequestError extends ServiceError {
  /** The field the description names (`field "budget_chars"`), or "" if none. */
  readonly field: string;

  constructor(endpoint: string, description: string) {
    super(endpoint, "400", description);
    this.field = /field "([^"]+)"/.exec(description)?.[1] ?? "";
  }
}

/** 404: the session has no checkpoint and no events (never seen, or not applied yet). */
export class UnknownSessionError extends ServiceError {
  constructor(endpoint: string, description: string) {
    super(endpoint, "404", description);
  }
}

/**
 * 503: the session's checkpoint cannot be decoded; the processor
 * quarantines it and rebuilds the session at its next event. Ask again
 * then. `reason` is the service's description.
 */
export class UnavailableError extends ServiceError {
  readonly reason: string;

  constructor(endpoint: string, description: string) {
    super(endpoint, "503", description);
    this.reason = description;
  }
}

/** 500: the service failed on its side (see the processor's logs). */
export class InternalServiceError extends ServiceError {
  constructor(endpoint: string, description: string) {
    super(endpoint, "500", description);
  }
}

/**
 * The service, or the stream's acknowledgement, did not answer in time; or
 * what {@link FoldstreamClient.waitCaughtUp} waited for did not happen in
 * time (the message says what).
 */
export class TimeoutError extends FoldstreamError {
  /** The subject that was asked. */
  readonly subject: string;
  /** The time waited, in milliseconds. */
  readonly timeoutMs: number;

  /** `waitedFor` says what did not happen in time (default: an answer on `subject`). */
  constructor(subject: string, timeoutMs: number, options?: ErrorOptions, waitedFor?: string) {
    super(`foldstream: ${waitedFor ?? `no answer on ${subject}`} within ${timeoutMs} ms`, options);
    this.subject = subject;
    this.timeoutMs = timeoutMs;
  }
}

/** Nothing listens on the subject: no processor serves the service (or no stream stores the subject). */
export class NoRespondersError extends FoldstreamError {
  /** The subject nothing listens on. */
  readonly subject: string;

  constructor(subject: string, what: string, options?: ErrorOptions) {
    super(`foldstream: nothing is listening on ${subject}: ${what}`, options);
    this.subject = subject;
  }
}

/**
 * The NATS server refused this connection's reply inbox: the shipped auth
 * configs (nats/auth) let each user read replies only under its own
 * prefix, `_INBOX_<user>`. Connect with that prefix (the `inboxPrefix`
 * option of {@link connect}).
 */
export class InboxPermissionError extends FoldstreamError {
  /** The inbox subject the server refused. */
  readonly subject: string;
  /** The prefix to set, e.g. "_INBOX_bot" ("_INBOX_<user>" when the user is not known). */
  readonly suggestedPrefix: string;

  constructor(subject: string, suggestedPrefix: string, options?: ErrorOptions) {
    super(
      `foldstream: the NATS server refused this connection's reply inbox ${subject} (permissions): ` +
        `connect with inboxPrefix: "${suggestedPrefix}", the one inbox prefix the auth configs let user ` +
        `${suggestedPrefix === "_INBOX_<user>" ? "<user>" : JSON.stringify(suggestedPrefix.slice("_INBOX_".length))} read (_INBOX_<user>)`,
      options,
    );
    this.subject = subject;
    this.suggestedPrefix = suggestedPrefix;
  }
}

/** One event of a batch that the stream did not acknowledge. */
export interface UnackedEvent {
  /** The event's index in the batch. */
  index: number;
  /** Its session. */
  session: string;
  /** Its turn_id: with the session, its Nats-Msg-Id. */
  turn_id: string;
  /** Why: the NATS error, a timeout, a closed connection. */
  error: Error;
}

/**
 * A batch publish in which some events were not acknowledged: they may
 * not be stored. Publish them again (their Nats-Msg-Id makes that safe):
 * `unacked` lists them, in batch order.
 */
export class PublishBatchError extends FoldstreamError {
  readonly unacked: UnackedEvent[];
  /** How many events the stream acknowledged. */
  readonly acked: number;

  constructor(unacked: UnackedEvent[], acked: number) {
    const first = unacked[0];
    super(
      `foldstream: ${unacked.length} of ${unacked.length + acked} events not acknowledged` +
        (first ? `; the first: turn ${JSON.stringify(first.turn_id)} of session ${first.session} (event ${first.index}): ${first.error.message}` : ""),
    );
    this.unacked = unacked;
    this.acked = acked;
  }
}

/** The client was closed. */
export class ClosedError extends FoldstreamError {
  constructor() {
    super("foldstream: client closed");
  }
}
