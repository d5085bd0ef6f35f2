/**
 * Validation before sending, with the processor's rules (internal/events
 * and the service's request checks): an event or request the processor
 * would refuse is a {@link ValidationError} naming the field, and nothing
 * is sent.
 *
 * @module
 */

import { ValidationError } from "./errors.js";
import type { Control, Note, SessionConfig, Turn } from "./wire.js";
import { namedSettings, settingRanges } from "./wire.js";

/** The wire contract version every event carries in "v". */
export const WIRE_VERSION = 1;

/** Size limits of what the processor accepts, in UTF-8 bytes. */
export interface Limits {
  /** The whole JSON payload (default 262144). */
  maxPayloadBytes: number;
  /** A turn's or note's text (default 65536). */
  maxTextBytes: number;
  /** turn_id and note_id (default 256). */
  maxIdBytes: number;
  /** A turn's speaker and a note's source (default 128). */
  maxSpeakerBytes: number;
}

/** The processor's default limits (its --max-* flags can change them). */
export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({
  maxPayloadBytes: 256 << 10,
  maxTextBytes: 64 << 10,
  maxIdBytes: 256,
  maxSpeakerBytes: 128,
});

/** The most a turn's tokens and context_tokens may be. */
export const MAX_TOKENS = 10_000_000;
/** The longest session id, in characters of [A-Za-z0-9_-]. */
export const MAX_SESSION_LENGTH = 128;
/** Roles a turn may have. */
export const ROLES = ["user", "assistant", "system", "tool"] as const;
/** Control operations. */
export const OPS = ["compact", "end", "reset", "generate", "configure"] as const;

/** A control operation. */
export type Op = (typeof OPS)[number];
/** A turn's role. */
export type Role = (typeof ROLES)[number];

// The service's request limits (client/recall.go).
/** The longest context query, in characters. */
export const MAX_CONTEXT_QUERY_CHARS = 4096;
/** The most earlier turns a context request may recall (recall_turns). */
export const MAX_RECALL_TURNS = 50;
/** The earlier turns a context request with a query recalls when it does not say. */
export const DEFAULT_RECALL_TURNS = 10;
/** The longest recall query, in characters. */
export const MAX_RECALL_QUERY_CHARS = 1024;
/** The most results a recall request may ask for. */
export const MAX_RECALL_LIMIT = 50;
/** The results a recall request returns when it does not say. */
export const DEFAULT_RECALL_LIMIT = 10;

const sessionPattern = /^[A-Za-z0-9_-]{1,128}$/;
const encoder = new TextEncoder();

/** Whether id is usable as a session id: one subject token of 1-128 characters from [A-Za-z0-9_-]. */
export function validSession(id: unknown): id is string {
  return typeof id === "string" && sessionPattern.test(id);
}

/** UTF-8 length in bytes. */
export function utf8Bytes(s: string): number {
  return encoder.encode(s).length;
}

/**
 * Whether s is longer than max UTF-8 bytes. A UTF-16 code unit is at most
 * 3 UTF-8 bytes, so a string of at most max/3 code units is not, and is
 * not encoded to find out.
 */
function overBytes(s: string, max: number): boolean {
  return s.length * 3 > max && utf8Bytes(s) > max;
}

/** A UTF-16 surrogate that is not half of a pair (a `u` regexp reads a pair as one code point). */
const loneSurrogate = /\p{Cs}/u;

/**
 * Whether s has no lone surrogate, i.e. is valid Unicode that UTF-8 can
 * encode as it is: what String.prototype.isWellFormed reports from
 * Node.js 20 on, here for Node.js 18 too.
 */
export function wellFormed(s: string): boolean {
  return !loneSurrogate.test(s);
}

/** Length in Unicode code points (Go's runes). */
export function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** Echoes user input in an error: at most 40 characters. */
function short(s: unknown): string {
  const str = String(s);
  const cps = Array.from(str);
  return JSON.stringify(cps.length > 40 ? cps.slice(0, 40).join("") + "…" : str);
}

const missing = (field: string, expected: string) => new ValidationError(field, "missing_field", `required, expected ${expected}`);
const invalid = (field: string, reason: string) => new ValidationError(field, "invalid_field", reason);

/** Checks a session id; field names where it came from ("session"). */
export function checkSession(field: string, id: unknown): void {
  if (validSession(id)) return;
  if (id === undefined || id === null || id === "") {
    throw new ValidationError(field, "bad_session", "required, expected a session id matching [A-Za-z0-9_-]{1,128}");
  }
  throw new ValidationError(field, "bad_session", `must be 1-${MAX_SESSION_LENGTH} characters from [A-Za-z0-9_-] (one subject token), got ${short(id)}`);
}

function checkString(field: string, v: unknown, optional: boolean): v is string {
  if (v === undefined && optional) return false;
  if (typeof v !== "string") throw invalid(field, `expected a JSON string, got ${typeof v}`);
  return true;
}

function checkId(field: string, id: unknown, max: number): void {
  if (id === undefined || id === null || (typeof id === "string" && blank(id))) {
    throw missing(field, "a non-empty string (the idempotency key)");
  }
  checkString(field, id, false);
  const s = id as string;
  if (overBytes(s, max)) throw invalid(field, `${utf8Bytes(s)} bytes, expected at most ${max}`);
  if (!wellFormed(s)) throw invalid(field, "expected valid UTF-8");
}

function checkText(field: string, text: unknown, max: number): void {
  if (text === undefined || text === null || (typeof text === "string" && blank(text))) {
    throw missing(field, "non-empty text");
  }
  checkString(field, text, false);
  const s = text as string;
  if (overBytes(s, max)) throw new ValidationError(field, "oversized", `${utf8Bytes(s)} bytes, expected at most ${max}`);
  if (!wellFormed(s)) throw invalid(field, "expected valid UTF-8 text");
}

const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))$/;
/** Go's zero time.Time, which the processor takes for a missing "at". */
const goZeroMs = -62135596800000; // 0001-01-01T00:00:00Z
const zeroAt = "an RFC 3339 timestamp like 2026-01-02T15:04:05Z (0001-01-01T00:00:00Z is Go's zero time: no timestamp)";

/** Whether s is a timestamp Go's strict RFC 3339 parser accepts: an upper-case T and Z, every field in range. */
function rfc3339Valid(s: string): boolean {
  const m = rfc3339.exec(s);
  if (!m) return false;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
  const days = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][mo - 1] ?? 0;
  if (d < 1 || d > days || h > 23 || mi > 59 || se > 59) return false;
  if (m[9] !== undefined && (Number(m[9]) > 23 || Number(m[10]) > 59)) return false;
  return !Number.isNaN(Date.parse(s));
}

/** Whether s is empty after Go's strings.TrimSpace (Unicode's White_Space, as unicode.IsSpace). */
function blank(s: string): boolean {
  return /^\p{White_Space}*$/u.test(s);
}

/** Encodes an "at" (a Date or an RFC 3339 string) for the wire, or undefined when absent. */
export function encodeAt(at: unknown): string | undefined {
  if (at === undefined || at === null) return undefined;
  if (at instanceof Date) {
    if (Number.isNaN(at.getTime())) throw invalid("at", "expected a valid Date, got an invalid one");
    if (at.getUTCFullYear() < 1 || at.getUTCFullYear() > 9999) {
      throw invalid("at", `expected a Date in the years 1..9999, got ${at.toISOString()}`);
    }
    if (at.getTime() === goZeroMs) throw missing("at", zeroAt);
    return at.toISOString();
  }
  if (typeof at === "string" && rfc3339Valid(at)) {
    if (Date.parse(at) === goZeroMs) throw missing("at", zeroAt);
    return at;
  }
  throw invalid("at", `expected an RFC 3339 timestamp like 2026-01-02T15:04:05Z or a Date, got ${short(at)}`);
}

function checkInt(field: string, v: unknown, min: number, max: number): void {
  if (v === undefined) return;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min || v > max) {
    throw invalid(field, `expected an integer ${min}..${max}, got ${typeof v === "number" ? v : short(v)}`);
  }
}

/**
 * A turn as a bot gives it to {@link FoldstreamClient.publishTurn}: the
 * wire {@link Turn} without "v", "at" optional (a Date or an RFC 3339
 * string; default now) and "role" optional (default "user").
 */
export type TurnInput = Omit<Turn, "v" | "at" | "role"> & { at?: Date | string; role?: Role };

/** A note as a bot gives it to {@link FoldstreamClient.publishNote}: "at" optional (default now). */
export type NoteInput = Omit<Note, "v" | "at"> & { at?: Date | string };

/**
 * Validates a turn and returns it as it goes on the wire (v 1, "at"
 * filled in with now if absent), or throws a ValidationError.
 */
export function prepareTurn(t: TurnInput, lim: Limits = DEFAULT_LIMITS, now: () => Date = () => new Date()): Turn {
  if (t === null || typeof t !== "object") throw new ValidationError("payload", "bad_json", "expected a turn object");
  checkSession("session", t.session);
  checkId("turn_id", t.turn_id, lim.maxIdBytes);
  const at = encodeAt(t.at) ?? now().toISOString();
  if (t.speaker === undefined || t.speaker === null || (typeof t.speaker === "string" && blank(t.speaker))) {
    throw missing("speaker", 'the speaker\'s display name, e.g. "Alice"');
  }
  checkString("speaker", t.speaker, false);
  if (overBytes(t.speaker, lim.maxSpeakerBytes) || !wellFormed(t.speaker)) {
    throw invalid("speaker", `expected valid UTF-8 of at most ${lim.maxSpeakerBytes} bytes`);
  }
  const role: string = t.role ?? "user";
  if (role === "") throw missing("role", "one of user, assistant, system, tool");
  if (!(ROLES as readonly string[]).includes(role)) {
    throw invalid("role", `expected one of user, assistant, system, tool, got ${short(role)}`);
  }
  checkText("text", t.text, lim.maxTextBytes);
  checkInt("tokens", t.tokens, 0, MAX_TOKENS);
  checkInt("context_tokens", t.context_tokens, 0, MAX_TOKENS);
  checkString("kind", t.kind, true);
  checkString("tool", t.tool, true);
  if (t.meta !== undefined) {
    if (t.meta === null || typeof t.meta !== "object" || Array.isArray(t.meta)) throw invalid("meta", "expected a JSON object of strings");
    for (const [k, v] of Object.entries(t.meta)) {
      if (typeof v !== "string") throw invalid(`meta.${k}`, `expected a JSON string, got ${typeof v}`);
    }
  }
  // The Go processor's field order, so that the payload is the Go client's.
  const wire: Turn = { v: WIRE_VERSION, session: t.session, turn_id: t.turn_id, at, speaker: t.speaker, role: role as Role, text: t.text };
  if (t.kind) wire.kind = t.kind;
  if (t.tool) wire.tool = t.tool;
  if (t.tokens) wire.tokens = t.tokens;
  if (t.context_tokens) wire.context_tokens = t.context_tokens;
  if (t.meta && Object.keys(t.meta).length > 0) wire.meta = t.meta;
  return wire;
}

/** Validates a note and returns it as it goes on the wire, or throws a ValidationError. */
export function prepareNote(n: NoteInput, lim: Limits = DEFAULT_LIMITS, now: () => Date = () => new Date()): Note {
  if (n === null || typeof n !== "object") throw new ValidationError("payload", "bad_json", "expected a note object");
  checkSession("session", n.session);
  checkId("note_id", n.note_id, lim.maxIdBytes);
  const at = encodeAt(n.at) ?? now().toISOString();
  if (checkString("source", n.source, true) && (overBytes(n.source!, lim.maxSpeakerBytes) || !wellFormed(n.source!))) {
    throw invalid("source", `expected valid UTF-8 of at most ${lim.maxSpeakerBytes} bytes`);
  }
  checkText("text", n.text, lim.maxTextBytes);
  return { v: WIRE_VERSION, session: n.session, note_id: n.note_id, at, ...(n.source ? { source: n.source } : {}), text: n.text };
}

/** Validates a control event and returns it as it goes on the wire, or throws a ValidationError. */
export function prepareControl(session: string, op: string, config?: SessionConfig, now: () => Date = () => new Date()): Control {
  checkSession("session", session);
  if (op === undefined || op === null || op === "") throw missing("op", "one of compact, end, reset, generate, configure");
  if (!(OPS as readonly string[]).includes(op)) {
    throw invalid("op", `expected one of compact, end, reset, generate, configure, got ${short(op)}`);
  }
  const wire: Control = { v: WIRE_VERSION, session, op: op as Op, at: now().toISOString() };
  if (op === "configure") {
    if (config === undefined || config === null) throw missing("config", "an object with the settings to override for op configure");
    checkSessionConfig(config);
  }
  if (config !== undefined && config !== null) wire.config = config;
  return wire;
}

/**
 * Validates a configure's settings as the processor does: every numeric
 * setting within its range, the named values, and the pairs that must
 * agree.
 */
export function checkSessionConfig(c: SessionConfig): void {
  if (c === null || typeof c !== "object" || Array.isArray(c)) throw invalid("config", "expected a JSON object");
  const rec = c as Record<string, unknown>;
  for (const r of settingRanges) {
    const v = rec[r.key];
    if (v === undefined || v === null) continue;
    const field = `config.${r.key}`;
    if (typeof v !== "number" || !Number.isFinite(v)) throw invalid(field, `expected a JSON number, got ${short(v)}`);
    if (v === 0 && !r.zeroIsValue) continue;
    if (r.exclusive) {
      if (!(v > r.min && v < r.max)) throw invalid(field, `expected a number between ${r.min} and ${r.max} (exclusive), got ${v}`);
      continue;
    }
    if (v < r.min || v > r.max || (r.integer && !Number.isInteger(v))) {
      throw invalid(field, `expected ${r.zeroIsValue && r.min === 0 ? "0 (off)" : r.min}..${r.max}${r.integer ? " (an integer)" : ""}, got ${v}`);
    }
  }
  if (rec.disabled !== undefined && typeof rec.disabled !== "boolean") throw invalid("config.disabled", "expected true or false");
  for (const key of ["trigger", "profile", "mode"] as const) {
    const v = rec[key];
    if (v === undefined || v === "") continue;
    const allowed: readonly string[] = namedSettings[key];
    if (typeof v !== "string" || !allowed.includes(v)) throw invalid(`config.${key}`, `expected one of ${allowed.join(", ")}, got ${short(v)}`);
  }
  const num = (k: string) => (typeof rec[k] === "number" ? (rec[k] as number) : 0);
  if (num("context_window") !== 0 && num("reserve_tokens") >= num("context_window")) {
    throw invalid("config.reserve_tokens", `expected less than context_window (${num("context_window")}), got ${num("reserve_tokens")}`);
  }
  if (num("idle_threshold") !== 0 && num("emergency_threshold") !== 0 && num("idle_threshold") >= num("emergency_threshold")) {
    throw invalid("config.idle_threshold", `expected below emergency_threshold (${num("emergency_threshold")}), got ${num("idle_threshold")}`);
  }
  const policy = rec.reset_policy;
  if (policy !== undefined && policy !== "") {
    if (typeof policy !== "string" || !(namedSettings.reset_policy as readonly string[]).includes(policy)) {
      throw invalid("config.reset_policy", `expected manual, daily or idle, got ${short(policy)}`);
    }
    if (policy === "daily" && (rec.reset_hour === undefined || rec.reset_hour === null)) {
      throw missing("config.reset_hour", "an hour 0..23 (UTC) for reset_policy daily");
    }
    if (policy === "idle" && num("reset_idle_minutes") === 0) {
      throw missing("config.reset_idle_minutes", "minutes of silence after which reset_policy idle resets the session");
    }
  }
}

/** The options of a context request. */
export interface ContextOptions {
  /** The live user turn or the question the model is about to answer: makes the context question-aware (1..4096 characters; "" is refused, leave it out for a context without a query). */
  query?: string;
  /** The most characters the rendered context may cost (0 or absent: unlimited). */
  budgetChars?: number;
  /** The most tokens it may cost (0 or absent: unlimited). */
  budgetTokens?: number;
  /** With a query: the most earlier turns recalled as best matches, 1..50. */
  recallTurns?: number;
  /** Milliseconds to wait for the answer (default: the client's requestTimeout). */
  timeout?: number;
}

/** Validates a context request as the service would and returns its JSON body. */
export function contextRequest(session: string, o: ContextOptions = {}): Record<string, unknown> {
  checkSession("session", session);
  const req: Record<string, unknown> = { session };
  const budget = (field: string, v: unknown) => {
    if (v === undefined || v === 0) return;
    // A safe integer: a larger one (1e300 is an integer to JavaScript) is past what the service reads.
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
      throw invalid(field, `expected a non-negative integer (0 = unlimited) up to ${Number.MAX_SAFE_INTEGER}, got ${typeof v === "number" ? v : short(v)}`);
    }
    req[field] = v;
  };
  budget("budget_chars", o.budgetChars);
  budget("budget_tokens", o.budgetTokens);
  const query = o.query ?? "";
  if (typeof query !== "string") throw invalid("query", `expected a string, got ${typeof query}`);
  if (o.query === "") {
    throw invalid("query", `expected 1..${MAX_CONTEXT_QUERY_CHARS} characters, got none (leave query out for a context without a query)`);
  }
  if (codePoints(query) > MAX_CONTEXT_QUERY_CHARS) {
    throw invalid("query", `expected 1..${MAX_CONTEXT_QUERY_CHARS} characters, got ${codePoints(query)}`);
  }
  if (query !== "" && blank(query)) {
    throw invalid("query", `expected 1..${MAX_CONTEXT_QUERY_CHARS} characters with at least one that is not a space, got ${short(query)}`);
  }
  if (query !== "") req.query = query;
  const rt = o.recallTurns;
  if (rt !== undefined && rt !== 0) {
    if (typeof rt !== "number" || !Number.isInteger(rt) || rt < 0 || rt > MAX_RECALL_TURNS) {
      throw invalid("recall_turns", `expected 1..${MAX_RECALL_TURNS} (omit it for ${DEFAULT_RECALL_TURNS}), got ${typeof rt === "number" ? rt : short(rt)}`);
    }
    if (query === "") throw invalid("recall_turns", 'only applies with a query (field "query" is empty)');
    req.recall_turns = rt;
  }
  return req;
}

/** Recall scopes: the turns before the cursor (the default), or every turn since the last reset. */
export type RecallScope = "evicted" | "all";

/** The options of a recall request. */
export interface RecallOptions {
  /** The most results, 1..50 (default 10). */
  limit?: number;
  /** Which turns to search (default "evicted"). */
  scope?: RecallScope;
  /** Milliseconds to wait for the answer (default: the client's requestTimeout). */
  timeout?: number;
}

/** Validates a recall request as the service would and returns its JSON body. */
export function recallRequest(session: string, query: string, o: RecallOptions = {}): Record<string, unknown> {
  checkSession("session", session);
  if (typeof query !== "string" || blank(query)) throw invalid("query", `expected a non-empty query, got ${short(query)}`);
  if (codePoints(query) > MAX_RECALL_QUERY_CHARS) {
    throw invalid("query", `expected at most ${MAX_RECALL_QUERY_CHARS} characters, got ${codePoints(query)}`);
  }
  if (!/[\p{L}\p{N}]/u.test(query)) throw invalid("query", `expected at least one word (letters or digits), got ${short(query)}`);
  const req: Record<string, unknown> = { v: WIRE_VERSION, session, query };
  const limit = o.limit ?? 0;
  if (limit !== 0) {
    if (typeof limit !== "number" || !Number.isInteger(limit) || limit < 1 || limit > MAX_RECALL_LIMIT) {
      throw invalid("limit", `expected 1..${MAX_RECALL_LIMIT} (omit it for ${DEFAULT_RECALL_LIMIT}), got ${typeof limit === "number" ? limit : short(limit)}`);
    }
    req.limit = limit;
  }
  const scope = o.scope ?? "";
  if (scope !== "") {
    if (scope !== "evicted" && scope !== "all") throw invalid("scope", `expected "evicted" or "all", got ${short(scope)}`);
    req.scope = scope;
  }
  return req;
}
