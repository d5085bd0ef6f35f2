// The shared conformance cases (clients/conformance, format in its
// README.md) against this client and a real processor.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import type { JetStreamManager } from "@nats-io/jetstream";

import {
  BadRequestError,
  connect,
  Context,
  contextTurnLine,
  contextText,
  UnknownSessionError,
  ValidationError,
} from "../src/index.js";
import type { ContextReply, FoldstreamClient, Op, SessionConfig, TurnInput } from "../src/index.js";
import { codePoints } from "../src/validate.js";
import { conformanceDir, missing, Processor } from "./harness.js";

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** Reads a file of the suite, its {"$repeat": s, "count": n} values expanded. */
function readCases<T>(name: string): T {
  const expand = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(expand);
    if (v !== null && typeof v === "object") {
      const o = v as Record<string, unknown>;
      if (typeof o.$repeat === "string") return o.$repeat.repeat(o.count as number);
      return Object.fromEntries(Object.entries(o).map(([k, e]) => [k, expand(e)]));
    }
    return v;
  };
  return expand(JSON.parse(readFileSync(join(conformanceDir, name), "utf8"))) as T;
}

interface EventCase {
  name: string;
  type: "turn" | "note" | "control";
  event: Record<string, Json>;
  valid: boolean;
  field?: string;
  code?: string;
  wire_only?: boolean;
}

interface Checks {
  equal?: Record<string, Json>;
  len?: Record<string, number>;
  min_len?: Record<string, number>;
  max?: Record<string, number>;
  min?: Record<string, number>;
  present?: string[];
  absent?: string[];
  some?: Record<string, Record<string, Json>>;
  prefix?: Record<string, string>;
  contains?: Record<string, string>;
  text_chars?: boolean;
  messages?: Checks;
  count?: number;
}

interface RequestCase {
  name: string;
  endpoint: "context" | "session" | "recall";
  request: Record<string, Json>;
  wire_only?: boolean;
  expect: { error?: { code: string; field?: string }; reply?: Checks };
}

/** A dotted path in decoded JSON; negative array indexes count from the end. */
function at(v: unknown, path: string): { ok: boolean; v: unknown } {
  for (const key of path.split(".")) {
    if (Array.isArray(v)) {
      let i = Number(key);
      if (!Number.isInteger(i)) return { ok: false, v: undefined };
      if (i < 0) i += v.length;
      if (i < 0 || i >= v.length) return { ok: false, v: undefined };
      v = v[i];
    } else if (v !== null && typeof v === "object" && key in v) {
      v = (v as Record<string, unknown>)[key];
    } else {
      return { ok: false, v: undefined };
    }
  }
  return { ok: true, v };
}

function check(reply: unknown, c: Checks): string[] {
  const out: string[] = [];
  const arr = (path: string) => {
    const r = at(reply, path);
    if (!Array.isArray(r.v)) out.push(`${path}: expected an array, got ${JSON.stringify(r.v)}`);
    return Array.isArray(r.v) ? r.v : undefined;
  };
  const num = (path: string) => {
    const r = at(reply, path);
    if (typeof r.v !== "number") out.push(`${path}: expected a number, got ${JSON.stringify(r.v)}`);
    return typeof r.v === "number" ? r.v : undefined;
  };
  for (const [p, want] of Object.entries(c.equal ?? {})) {
    const r = at(reply, p);
    if (!r.ok || !isDeepEqual(r.v, want)) out.push(`${p}: ${JSON.stringify(r.v)}, expected ${JSON.stringify(want)}`);
  }
  for (const [p, n] of Object.entries(c.len ?? {})) {
    const a = arr(p);
    if (a && a.length !== n) out.push(`${p}: ${a.length} items, expected ${n}`);
  }
  for (const [p, n] of Object.entries(c.min_len ?? {})) {
    const a = arr(p);
    if (a && a.length < n) out.push(`${p}: ${a.length} items, expected at least ${n}`);
  }
  for (const [p, n] of Object.entries(c.max ?? {})) {
    const v = num(p);
    if (v !== undefined && v > n) out.push(`${p}: ${v}, expected at most ${n}`);
  }
  for (const [p, n] of Object.entries(c.min ?? {})) {
    const v = num(p);
    if (v !== undefined && v < n) out.push(`${p}: ${v}, expected at least ${n}`);
  }
  for (const p of c.present ?? []) {
    const r = at(reply, p);
    if (!r.ok || r.v === null || r.v === undefined) out.push(`${p}: missing`);
  }
  for (const p of c.absent ?? []) {
    const r = at(reply, p);
    if (r.ok && r.v !== null && r.v !== undefined) out.push(`${p}: ${JSON.stringify(r.v)}, expected none`);
  }
  for (const [p, want] of Object.entries(c.prefix ?? {})) {
    const r = at(reply, p);
    if (typeof r.v !== "string" || !r.v.startsWith(want)) out.push(`${p}: ${JSON.stringify(r.v)}, expected it to start with ${JSON.stringify(want)}`);
  }
  for (const [p, want] of Object.entries(c.contains ?? {})) {
    const r = at(reply, p);
    if (typeof r.v !== "string" || !r.v.includes(want)) out.push(`${p}: ${JSON.stringify(r.v)}, expected it to contain ${JSON.stringify(want)}`);
  }
  if (c.count !== undefined && Array.isArray(reply) && reply.length !== c.count) out.push(`${reply.length} items, expected ${c.count}`);
  for (const [p, want] of Object.entries(c.some ?? {})) {
    const a = arr(p);
    if (!a) continue;
    const found = a.some((item) =>
      Object.entries(want).every(([k, w]) => {
        const r = at(item, k);
        return r.ok ? isDeepEqual(r.v, w) : w === false;
      }),
    );
    if (!found) out.push(`${p}: no item with ${JSON.stringify(want)}`);
  }
  return out;
}

function isDeepEqual(a: unknown, b: unknown): boolean {
  try {
    assert.deepStrictEqual(a, b);
    return true;
  } catch {
    return false;
  }
}

const fixture = readCases<{ session: string; settled: { total_turns: number; cursor: number; version: number }; turns: TurnInput[] }>(
  "fixture.json",
);
const events = readCases<{ cases: EventCase[] }>("events.json").cases;
const requests = readCases<{ cases: RequestCase[] }>("requests.json").cases;
const rendering = readCases<{
  turn_lines: { speaker: string; role: string; text: string; line: string }[];
  context: ContextReply;
  text: string;
  messages: { role: string; content: string }[];
}>("rendering.json");

describe("conformance", { skip: missing }, () => {
  let proc: Processor;
  let fs: FoldstreamClient;
  let jsm: JetStreamManager;

  before(async () => {
    proc = await Processor.start();
    fs = await connect({ servers: proc.url });
    jsm = await jetstreamManager(fs.nc);
    await fs.publishTurns(fixture.turns.map((t) => ({ ...t, session: fixture.session })));
    const deadline = Date.now() + 30000;
    for (;;) {
      const s = await fs.waitCaughtUp(fixture.session);
      if (s.total_turns === fixture.settled.total_turns && s.cursor === fixture.settled.cursor && s.version === fixture.settled.version) break;
      assert.ok(Date.now() < deadline, `fixture session never settled: ${JSON.stringify(s)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  });

  after(async () => {
    await fs?.close();
    await proc?.close();
  });

  const lastSeq = async (stream: string) => (await jsm.streams.info(stream)).state.last_seq;
  const dlqCount = async () => (await jsm.streams.info("FOLD_DLQ")).state.messages;

  /** Proves the session's events so far were applied, not dead-lettered: a refused turn after them is the only new dead letter. */
  async function accepted(session: string, before: number): Promise<void> {
    const sentinel = { v: 1, session, turn_id: "sentinel", at: "2026-11-22T20:00:00Z", speaker: "S", role: "sentinel", text: "x" };
    await fs.nc.request(`fold.in.${session}.turn`, JSON.stringify(sentinel)); // a JetStream publish: the stream's ack is the reply
    const deadline = Date.now() + 20000;
    let n = await dlqCount();
    while (n < before + 1) {
      assert.ok(Date.now() < deadline, "the sentinel was never dead-lettered");
      await new Promise((r) => setTimeout(r, 5));
      n = await dlqCount();
    }
    assert.equal(n, before + 1, "an event of the case was dead-lettered too");
  }

  test("events", async () => {
    const problems: string[] = [];
    for (const c of events.filter((e) => !e.wire_only)) {
      const inBefore = await lastSeq("FOLD_IN");
      const dlqBefore = await dlqCount();
      let err: unknown;
      try {
        const e = c.event as Record<string, unknown>;
        if (c.type === "turn") await fs.publishTurn(e as unknown as TurnInput);
        else if (c.type === "note") await fs.publishNote(e as never);
        else await fs.control(e.session as string, e.op as Op, e.config as SessionConfig | undefined);
      } catch (e) {
        err = e;
      }
      if (c.valid) {
        if (err !== undefined) problems.push(`${c.name}: ${String(err)}`);
        else await accepted(c.event.session as string, dlqBefore);
        continue;
      }
      if (!(err instanceof ValidationError)) {
        problems.push(`${c.name}: ${err === undefined ? "published" : String(err)}, expected a ValidationError naming ${c.field}`);
        continue;
      }
      if (err.field !== c.field || err.code !== c.code) problems.push(`${c.name}: field ${err.field} code ${err.code}, expected ${c.field} ${c.code}: ${err.message}`);
      if ((await lastSeq("FOLD_IN")) !== inBefore) problems.push(`${c.name}: refused, yet the inbound stream moved`);
    }
    assert.deepEqual(problems, []);
  });

  test("requests", async () => {
    const problems: string[] = [];
    for (const c of requests.filter((r) => !r.wire_only)) {
      const r = c.request as unknown as {
        session: string;
        query: string;
        budget_chars?: number;
        budget_tokens?: number;
        recall_turns?: number;
        limit?: number;
        scope?: "evicted" | "all";
      };
      let reply: unknown;
      let err: unknown;
      try {
        if (c.endpoint === "context") {
          reply = await fs.context(r.session, { ...(r.query === undefined ? {} : { query: r.query }), budgetChars: r.budget_chars, budgetTokens: r.budget_tokens, recallTurns: r.recall_turns });
        } else if (c.endpoint === "session") {
          reply = await fs.session(r.session);
        } else {
          reply = await fs.recall(r.session, r.query, { limit: r.limit, scope: r.scope });
        }
      } catch (e) {
        err = e;
      }
      const want = c.expect.error;
      if (want) {
        const ok =
          (want.code === "404" && err instanceof UnknownSessionError) ||
          (want.code === "400" && err instanceof BadRequestError && err.field === want.field) ||
          (want.code === "400" && err instanceof ValidationError && err.field === want.field);
        if (!ok) problems.push(`${c.name}: ${err === undefined ? JSON.stringify(reply).slice(0, 200) : String(err)}, expected ${want.code} ${want.field ?? ""}`);
        continue;
      }
      if (err !== undefined) {
        problems.push(`${c.name}: ${String(err)}`);
        continue;
      }
      const checks = c.expect.reply!;
      problems.push(...check(JSON.parse(JSON.stringify(reply)), checks).map((p) => `${c.name}: ${p}`));
      if (checks.text_chars) {
        const ctx = reply as Context;
        if (codePoints(ctx.text()) !== ctx.chars) problems.push(`${c.name}: text() has ${codePoints(ctx.text())} characters, chars ${ctx.chars}`);
      }
      if (checks.messages) {
        problems.push(...check((reply as Context).messages(), checks.messages).map((p) => `${c.name}: messages: ${p}`));
      }
    }
    assert.deepEqual(problems, []);
  });

  test("rendering", () => {
    assert.ok(rendering.turn_lines.length > 0);
    for (const l of rendering.turn_lines) {
      assert.equal(contextTurnLine(l), l.line, `speaker ${JSON.stringify(l.speaker)} role ${l.role}`);
    }
    assert.equal(contextText(rendering.context), rendering.text);
    assert.ok(rendering.messages.length > 0);
    assert.deepEqual(new Context(rendering.context).messages(), rendering.messages);
  });
});
