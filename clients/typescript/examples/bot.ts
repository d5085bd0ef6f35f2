// A bot that publishes N turns of a session with @foldstream/client and
// prints {"published": N} once every one is acknowledged.
//
//   node dist/examples/bot.js <nats-url> <session> <turns>
//
// Environment, for a server with the shipped auth configs (nats/auth):
//   NATS_USER, NATS_PASSWORD  log in as that user (e.g. bot)
//   NATS_INBOX_PREFIX         the user's private reply inbox prefix (e.g. _INBOX_bot)
//
// Exit status: 0 when every turn was acknowledged; 1 on a usage error or
// a failure (its message on stderr, e.g. the inbox prefix to set).
import { connect } from "../src/index.js";

const [url, session, countArg] = process.argv.slice(2);
const count = Number.parseInt(countArg ?? "", 10);
if (!url || !session || !Number.isInteger(count) || count < 1) {
  console.error("usage: node dist/examples/bot.js <nats-url> <session> <turns>");
  process.exit(1);
}

try {
  const fs = await connect({
    servers: url,
    ...(process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD ?? "" } : {}),
    ...(process.env.NATS_INBOX_PREFIX ? { inboxPrefix: process.env.NATS_INBOX_PREFIX } : {}),
  });
  const speakers = ["Alice", "Bob", "Carol"];
  const t0 = Date.parse("2026-11-22T20:00:00Z");
  const turns = Array.from({ length: count }, (_, i) => ({
    session,
    turn_id: `node-${String(i).padStart(4, "0")}`,
    at: new Date(t0 + i * 10000),
    speaker: speakers[i % speakers.length]!,
    text: `Node turn ${i}: ${speakers[i % speakers.length]} talks about the ranked match on Tokyo 2099.`,
    kind: "speech",
  }));
  const r = await fs.publishTurns(turns);
  console.log(JSON.stringify({ published: r.acked }));
  await fs.close();
} catch (err) {
  console.error(err instanceof Error ? `${err.name}: ${err.message}` : String(err));
  process.exit(1);
}
