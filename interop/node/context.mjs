// Asks foldstream's context service for a session's question-aware context
// with the npm "nats" client (a plain NATS request to <prefix>.svc.context,
// JSON as in schema/v1/context-request.json) and prints the reply
// (schema/v1/context-reply.json) as one JSON line, followed by the context
// rendered as a prompt the way the Go client's Context.Prompt renders it
// for plain speaker names and one-line texts. (The Go client also
// normalises names and shows line breaks as " ⏎ ", client.TurnLine, so
// that no name or text forges a prompt line: a builder in another
// language should do the same before its prompt reaches a model.)
//
//   node context.mjs <nats-url> <session> <query> [budget-chars]
//
// Exit status: 0 with the reply on stdout; 1 on a usage or connection
// error; 3 when the service answered with an error (code and description
// on stderr, e.g. 400 naming the field).
//
// Plain ES2017 on purpose, like publish.mjs.
import { connect, JSONCodec } from "nats";

const [url, session, query, budgetArg] = process.argv.slice(2);
if (!url || !session || query === undefined) {
  console.error("usage: node context.mjs <nats-url> <session> <query> [budget-chars]");
  process.exit(1);
}
const budget = Number.parseInt(budgetArg || "0", 10);

// The header lines and the label layout of the Go client (client/recall.go).
const MEMORIES_HEADER = "Remembered facts relevant to the question:";
const EXCERPTS_HEADER = "Earlier excerpts of this session relevant to the question (transcript order):";
const RECENT_HEADER = "Recent turns:";
const DAYS = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
const pad = (n) => String(n).padStart(2, "0");

function label(at) {
  const d = new Date(at);
  return `${DAYS[d.getUTCDay()]} ${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())} UTC`;
}

function recalledLine(r, labelled) {
  let s = r.kind === "memory" ? "- " : "";
  if (r.at && labelled) s += `[${label(r.at)}] `;
  if (r.speaker) s += `${r.speaker}: `;
  return s + r.text;
}

// A run of consecutive excerpt turns is labelled once, on its first line,
// as the Go client's ExcerptRun does: a turn continues the run when its
// index follows the previous line's and it was said no earlier than the
// run's label and at most RUN_SPAN_MS after it.
const RUN_SPAN_MS = 10 * 60 * 1000;

function recalledLines(items) {
  let run = null;
  return items.map((r) => {
    const at = r.at ? Date.parse(r.at) : NaN;
    if (r.kind !== "turn" || Number.isNaN(at)) {
      run = null;
      return recalledLine(r, true);
    }
    if (run && r.index === run.last + 1 && at >= run.label && at - run.label <= RUN_SPAN_MS) {
      run.last = r.index;
      return recalledLine(r, false);
    }
    run = { last: r.index, label: at };
    return recalledLine(r, true);
  });
}

function prompt(c) {
  const lines = [];
  if (c.summary) lines.push(c.summary.text);
  for (const e of c.evictions || []) lines.push(e.text);
  const recalled = c.recalled || [];
  [["memory", MEMORIES_HEADER], ["turn", EXCERPTS_HEADER]].forEach(([kind, header]) => {
    const items = recalled.filter((r) => r.kind === kind);
    if (items.length > 0) lines.push(header, ...recalledLines(items));
  });
  if (recalled.length > 0 && c.turns.length > 0) lines.push(RECENT_HEADER);
  for (const t of c.turns) lines.push(`${t.speaker}: ${t.text}`);
  return lines.map((l) => l + "\n").join("");
}

async function main() {
  const nc = await connect({ servers: url, name: "foldstream-interop-node-context" });
  const jc = JSONCodec();
  const req = { session, query };
  if (budget > 0) req.budget_chars = budget;
  const m = await nc.request("fold.svc.context", jc.encode(req), { timeout: 20000 });
  const code = m.headers && m.headers.get("Nats-Service-Error-Code");
  if (code) {
    console.error(`${code} ${m.headers.get("Nats-Service-Error")}`);
    await nc.close();
    process.exit(3);
  }
  const c = jc.decode(m.data);
  console.log(JSON.stringify(c));
  process.stdout.write(prompt(c));
  await nc.close();
}

main().catch((err) => {
  console.error(`context.mjs: ${err && err.message ? err.message : err}`);
  process.exit(1);
});
