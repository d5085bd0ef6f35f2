// Publishes N turns of a session to foldstream with the npm "nats" client
// and prints the first summary-updated it receives, as one JSON line. It
// speaks only the documented wire contract (README "Wire contract v1",
// schema/v1/*.json): nothing here is foldstream-specific code.
//
//   node publish.mjs <nats-url> <session> <turns> [timeout-seconds]
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
  const nc = await connect({ servers: url, name: "foldstream-interop-node" });
  const js = nc.jetstream();
  const jc = JSONCodec();

  // Subscribe before publishing, so the summary cannot slip past.
  const sub = nc.subscribe(`fold.out.${session}.summary`, { max: 1 });
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
