// Measures the TypeScript client: publish throughput with every ack
// awaited (publishTurns, at most --max-pending in flight) and the context
// request round trip, one request at a time. Prints one JSON line, with the
// same fields as the Python client's bench (clients/python/bench.py):
//
//   {"client":"typescript","turns":20000,"publish_s":1.2,"turns_per_s":16000,
//    "contexts":500,"context_p50_ms":0.5,"context_p99_ms":1.1,"context_mean_ms":0.6}
//
//   node dist/bench/bench.js --url nats://127.0.0.1:4222 --session S [--turns 20000]
//     [--contexts 500] [--warmup 20] [--query Q] [--budget-chars N] [--budget-tokens N] [--max-pending 256]
import { parseArgs } from "node:util";
import { connect } from "../src/index.js";
import type { ContextOptions } from "../src/index.js";

const { values: a } = parseArgs({
  options: {
    url: { type: "string", default: "nats://127.0.0.1:4222" },
    session: { type: "string", default: "" },
    turns: { type: "string", default: "20000" },
    "publish-session": { type: "string", default: "" },
    contexts: { type: "string", default: "500" },
    warmup: { type: "string", default: "20" },
    query: { type: "string", default: "" },
    "budget-chars": { type: "string", default: "0" },
    "budget-tokens": { type: "string", default: "0" },
    "max-pending": { type: "string", default: "256" },
  },
});

const percentile = (sorted: number[], p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.max(0, Math.round((p / 100) * sorted.length + 0.5) - 1))]!;
const round = (x: number) => Math.round(x * 1000) / 1000;

const fs = await connect({ servers: a.url, maxPending: Number(a["max-pending"]) });
const out: Record<string, unknown> = { client: "typescript" };
const turns = Number(a.turns);
if (turns > 0) {
  const session = a["publish-session"] || `bench-ts-${Date.now()}`;
  const batch = Array.from({ length: turns }, (_, i) => ({
    session,
    turn_id: `t${String(i).padStart(7, "0")}`,
    speaker: i % 2 === 0 ? "Alice" : "Bot",
    role: i % 2 === 0 ? ("user" as const) : ("assistant" as const),
    text: `turn ${i}: the ranked match on Tokyo 2099 starts at nine, bring the form`,
  }));
  const t0 = performance.now();
  await fs.publishTurns(batch);
  const s = (performance.now() - t0) / 1000;
  Object.assign(out, { turns, publish_s: round(s), turns_per_s: Math.round((turns / s) * 10) / 10, publish_session: session });
}
const contexts = Number(a.contexts);
if (contexts > 0) {
  if (!a.session) throw new Error("--session: required with --contexts > 0");
  const opts: ContextOptions = {};
  if (a.query) opts.query = a.query;
  if (Number(a["budget-chars"])) opts.budgetChars = Number(a["budget-chars"]);
  if (Number(a["budget-tokens"])) opts.budgetTokens = Number(a["budget-tokens"]);
  for (let i = 0; i < Number(a.warmup); i++) await fs.context(a.session, opts);
  const ms: number[] = [];
  for (let i = 0; i < contexts; i++) {
    const t0 = performance.now();
    await fs.context(a.session, opts);
    ms.push(performance.now() - t0);
  }
  ms.sort((x, y) => x - y);
  Object.assign(out, {
    contexts, context_p50_ms: round(percentile(ms, 50)), context_p99_ms: round(percentile(ms, 99)),
    context_mean_ms: round(ms.reduce((x, y) => x + y, 0) / ms.length), session: a.session,
  });
}
await fs.close();
process.stdout.write(JSON.stringify(out) + "\n");
