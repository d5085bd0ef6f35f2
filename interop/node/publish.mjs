// Publishes N turns of a session to foldstream with the npm "nats" client
// and prints the first summary-updated it receives, as one JSON line. It
// speaks only the documented wire contract (README "Wire contract v1",
// schema/v1/*.json): nothing here is foldstream-specific code.
//
//   node publish.mjs <nats-url> <session> <turns> [timeout-seconds]
//
// Environment, for a server with the shipped auth configs (nats/auth):
//   NATS_USER, NATS_PASSWORD  log in as that user (e.g. bot)
//   NATS_INBOX_PREFIX         the user's private reply inbox prefix (e.g.
//                             _INBOX_bot): the configs let a user read
//                             replies, such as its JetStream publish acks,
//                             only under _INBOX_<user>, so that nobody reads
//                             another user's replies; nats.js takes it as the
//                             connect option inboxPrefix
//   WAIT_SUMMARY=0            do not wait for the summary (a bot user may not
//                             subscribe to fold.out.>): print
//                             {"published":N} once every turn is acknowledged
//
// Exit status: 0 with the summary on stdout; 1 on a usage or connection
// error; 2 when no summary arrived in time.
//
// Plain ES2017 on purpose (no top-level await, no "??"): distribution
// packages of Node.js, which CI may install, can be old.
import { connect, JSONCodec } from "nats";

const [url, session, countArg, timeoutArg] = process.argv.slice(2);
const count = Number.parseInt(countArg || "", 10);
if (!url || !session || !Number.isInteger(count) || count < 1) {
  console.error("usage: node publish.mjs <nats-url> <session> <turns> [timeout-seconds]");
  process.exit(1);
}
if (!/^[A-Za-z0-9_-]{1,128}$/.test(session)) {
  console.error(`session ${JSON.stringify(session)}: expected 1-128 characters from [A-Za-z0-9_-]`);
  process.exit(1);
}
const timeoutMs = 1000 * Number.parseFloat(timeoutArg || "30");

async function main() {
  const opts = { servers: url, name: "foldstream-interop-node" };
  if (process.env.NATS_USER) {
    opts.user = process.env.NATS_USER;
    opts.pass = process.env.NATS_PASSWORD || "";
  }
  if (process.env.NATS_INBOX_PREFIX) {
    opts.inboxPrefix = process.env.NATS_INBOX_PREFIX; // replies arrive on <prefix>.<random>
  }
  const wait = process.env.WAIT_SUMMARY !== "0";
  const nc = await connect(opts);
  const js = nc.jetstream();
  const jc = JSONCodec();

  // Subscribe before publishing, so the summary cannot slip past.
  const sub = wait ? nc.subscribe(`fold.out.${session}.summary`, { max: 1 }) : null;
  const timer = setTimeout(() => {
    console.error(`no summary-updated on fold.out.${session}.summary within ${timeoutMs} ms`);
    process.exit(2);
  }, timeoutMs);

  const speakers = ["Alice", "Bob", "Carol"];
  const t0 = Date.parse("2026-11-22T20:00:00Z");
  for (let i = 0; i < count; i++) {
    const turnId = `node-${String(i).padStart(4, "0")}`;
    const turn = {
      v: 1,
      session,
      turn_id: turnId,
      at: new Date(t0 + i * 10000).toISOString(),
      speaker: speakers[i % speakers.length],
      role: "user",
      text: `Node turn ${i}: ${speakers[i % speakers.length]} talks about the ranked match on Tokyo 2099.`,
      kind: "speech",
    };
    // msgID "<session>:<turn_id>": the stream stores a re-sent turn once.
    const ack = await js.publish(`fold.in.${session}.turn`, jc.encode(turn), { msgID: `${session}:${turnId}` });
    if (ack.stream !== "FOLD_IN") {
      console.error(`turn ${turnId} stored by stream ${ack.stream}, expected FOLD_IN`);
      process.exit(1);
    }
  }

  if (!wait) {
    clearTimeout(timer);
    console.log(JSON.stringify({ published: count }));
    await nc.drain();
    return;
  }
  for await (const m of sub) {
    clearTimeout(timer);
    console.log(JSON.stringify(jc.decode(m.data)));
  }
  await nc.drain();
}

main().catch((err) => {
  console.error(`publish.mjs: ${err && err.message ? err.message : err}`);
  process.exit(1);
});
