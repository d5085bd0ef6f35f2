// The client against a real processor: publishing (dedup ids, batches, a
// connection lost in the middle of one), the context and its renderings
// (identical to the `processor context` command's), waiting until caught
// up, and one error class per service answer.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect as natsConnect } from "@nats-io/transport-node";

import {
  BadRequestError,
  connect,
  FoldstreamClient,
  FoldstreamError,
  NoRespondersError,
  PublishBatchError,
  TimeoutError,
  UnavailableError,
  UnknownSessionError,
  ValidationError,
} from "../src/index.js";
import type { TurnInput } from "../src/index.js";
import { createServer, connect as netConnect } from "node:net";
import type { Server, Socket } from "node:net";
import { freePort, missing, Processor } from "./harness.js";

const t0 = Date.parse("2026-11-22T20:00:00Z");

/** Turn i of a session: alternating speakers 10 s apart, every fourth the bot's. */
function turn(session: string, i: number, text?: string): TurnInput {
  const bot = i % 4 === 3;
  const speaker = bot ? "Bot" : ["Alice", "Bob"][i % 2]!;
  return {
    session,
    turn_id: `t${String(i).padStart(4, "0")}`,
    speaker,
    role: bot ? "assistant" : "user",
    text: text ?? `Turn ${i}: ${speaker} talks about the ranked match on Tokyo 2099.`,
    at: new Date(t0 + i * 10000),
    kind: "speech",
  };
}

describe("client", { skip: missing }, () => {
  let proc: Processor;
  let fs: FoldstreamClient;

  before(async () => {
    proc = await Processor.start();
    fs = await connect({ servers: proc.url });
  });
  after(async () => {
    await fs?.close();
    await proc?.close();
  });

  test("a re-published turn is stored once (Nats-Msg-Id <session>:<turn_id>)", async () => {
    const first = await fs.publishTurn({ session: "dedup", turn_id: "t1", speaker: "Alice", text: "Hello." });
    const again = await fs.publishTurn({ session: "dedup", turn_id: "t1", speaker: "Alice", text: "Hello." });
    assert.equal(first.duplicate, false);
    assert.equal(again.duplicate, true);
    assert.equal(again.seq, first.seq);
    const jsm = await jetstreamManager(fs.nc);
    const stored = await jsm.streams.getMessage("FOLD_IN", { last_by_subj: "fold.in.dedup.turn" });
    assert.equal(stored?.header.get("Nats-Msg-Id"), "dedup:t1");
    const s = await fs.waitCaughtUp("dedup");
    assert.equal(s.total_turns, 1);
  });

  test("await using closes the client and the connection it opened at the end of its scope", async () => {
    let nc: FoldstreamClient["nc"];
    {
      await using scoped = await connect({ servers: proc.url });
      nc = scoped.nc;
      assert.equal((await scoped.publishTurn({ session: "scoped", turn_id: "t1", speaker: "Alice", text: "Hello." })).duplicate, false);
      assert.equal(nc.isClosed(), false);
    }
    assert.equal(nc.isClosed(), true);
  });

  test("an invalid event is refused before sending, naming the field", async () => {
    await assert.rejects(fs.publishTurn({ session: "bad", turn_id: "t1", speaker: "Alice", text: "hi", role: "robot" as never }), (e: unknown) => {
      return e instanceof ValidationError && e.field === "role" && e.code === "invalid_field" && /role/.test(e.message);
    });
    await assert.rejects(fs.publishTurns([turn("bad", 0), { ...turn("bad", 1), text: " " }]), (e: unknown) => {
      return e instanceof ValidationError && e.field === "text" && e.index === 1;
    });
    await assert.rejects(fs.session("bad"), UnknownSessionError); // nothing of the batch was sent
  });

  test("61 turns fold into a summary; the contexts render as the CLI prints them", async () => {
    const session = "ts-s1";
    const turns = Array.from({ length: 61 }, (_, i) => turn(session, i, i === 5 ? "Can someone send the tournament form by Friday?" : undefined));
    turns[20] = { ...turns[20]!, speaker: "Dana (assistant)", text: "Line one.\nLine two." };
    const r = await fs.publishTurns(turns);
    assert.deepEqual(r, { acked: 61, duplicates: 0 });
    let s = await fs.waitCaughtUp(session);
    while (s.version < 1) s = await fs.waitCaughtUp(session);
    assert.equal(s.total_turns, 61);
    assert.equal(s.cursor, 10);

    const plain = await fs.context(session);
    assert.ok(plain.summary?.text.startsWith("Earlier in this session: "));
    assert.equal(plain.turns.length, 51);
    const cli = (args: string[]) => proc.cli("context", "--session", session, ...args).split("\n").slice(1).join("\n");
    assert.equal(plain.text(), cli([]));
    const asked = await fs.context(session, { query: "When is the tournament form due?", budgetChars: 3000 });
    assert.ok(asked.recalled?.some((x) => x.index === 5));
    assert.ok(asked.chars <= 3000);
    assert.equal(asked.text(), cli(["--query", "When is the tournament form due?", "--budget-chars", "3000"]));
    assert.equal([...asked.text()].length, asked.chars);

    const msgs = asked.messages();
    assert.equal(msgs[0]!.role, "system");
    assert.ok(msgs[0]!.content.includes("Earlier excerpts (in order):"));
    assert.equal(msgs.length, 1 + asked.turns.length);
    for (const [i, t] of asked.turns.entries()) assert.equal(msgs[i + 1]!.role, t.role === "assistant" ? "assistant" : "user");
    // JSON.stringify gives the reply as the service sent it, without the methods.
    assert.equal(JSON.parse(JSON.stringify(asked)).session, session);

    const rec = await fs.recall(session, "tournament form");
    assert.equal(rec.results[0]?.turn_id, "t0005");
    const jsm = await jetstreamManager(fs.nc);
    assert.equal((await jsm.streams.info("FOLD_DLQ")).state.messages, 0, "nothing the client sent was dead-lettered");
  });

  test("one error class per service answer", async () => {
    await assert.rejects(fs.context("nobody-here"), (e: unknown) => e instanceof UnknownSessionError && e.code === "404");
    await assert.rejects(fs.context("ts-s1", { query: "tournament", budgetChars: 5 }), (e: unknown) => {
      return e instanceof BadRequestError && e.field === "budget_chars" && e.code === "400";
    });
    // 503: a checkpoint that cannot be decoded.
    await fs.publishTurn({ session: "broken", turn_id: "t1", speaker: "Alice", text: "hi" });
    await fs.waitCaughtUp("broken");
    await fs.nc.request("$KV.FOLD_SESSIONS.broken", "{not json");
    await assert.rejects(fs.session("broken"), (e: unknown) => e instanceof UnavailableError && /quarantined/.test(e.reason));

    const nobody = await connect({ servers: proc.url, prefix: "nobody" });
    await assert.rejects(nobody.session("s1"), (e: unknown) => e instanceof NoRespondersError && /nobody\.svc\.session/.test(e.message));
    await nobody.close();

    const slow = await natsConnect({ servers: proc.url });
    slow.subscribe("slow.svc.session"); // listens, never answers
    await slow.flush();
    const impatient = await connect({ servers: proc.url, prefix: "slow", requestTimeout: 200 });
    await assert.rejects(impatient.session("s1"), (e: unknown) => e instanceof TimeoutError && e.timeoutMs === 200);
    await impatient.close();
    await slow.close();
  });

  test("a summary update that does not decode is reported to onError and skipped; the watch goes on", async () => {
    const errors: Error[] = [];
    const watcher = await connect({ servers: proc.url, onError: (e) => errors.push(e) });
    const abort = new AbortController();
    try {
      const subject = "fold.out.undecodable.summary";
      await watcher.nc.request(subject, "{not json"); // a JetStream publish: the stream's ack is the reply
      const watch = watcher.watchSummaries("undecodable", { from: "latest", signal: abort.signal });
      const first = watch.next();
      // Resolves when n errors were reported; a watch that fails instead rejects it at once.
      const reported = async (n: number) => {
        while (errors.length < n) await Promise.race([first, new Promise((r) => setTimeout(r, 5))]);
      };
      await reported(1);
      await watcher.nc.request(subject, "[1]");
      await reported(2);
      await watcher.nc.request(subject, JSON.stringify({ v: 1, session: "undecodable", version: 7, summary: "Alice and Bob talked." }));
      const got = await first;
      assert.equal(got.done, false);
      assert.equal(got.value?.version, 7);
      assert.equal(errors.length, 2);
      assert.ok(errors.every((e) => e instanceof FoldstreamError), String(errors));
      assert.match(errors[0]!.message, /^foldstream: watch fold\.out\.undecodable\.summary: undecodable summary-updated skipped: /);
      assert.match(errors[1]!.message, /expected a JSON object$/);
    } finally {
      abort.abort();
      await watcher.close();
    }
  });

  test("waitCaughtUp's timeout says what it waited for", async () => {
    await assert.rejects(fs.waitCaughtUp("never-published", { timeout: 100 }), (e: unknown) => {
      return e instanceof TimeoutError && e.timeoutMs === 100 &&
        e.message === "foldstream: session never-published: the processor has not caught up with stream seq 0 (no checkpoint yet) within 100 ms";
    });
  });

  test("a publish that no stream acknowledges is an error of its own class, and a batch lists every turn", async () => {
    // No stream stores nobody.in.>: the server answers no responders at once.
    const nobody = await connect({ servers: proc.url, prefix: "nobody" });
    await assert.rejects(nobody.publishTurn(turn("s1", 0)), (e: unknown) => e instanceof NoRespondersError && /nobody\.in\.s1\.turn/.test(e.message));
    const none = await nobody.publishTurns([turn("s1", 0), turn("s1", 1), turn("s1", 2)]).then(() => undefined, (e: unknown) => e);
    assert.ok(none instanceof PublishBatchError, `expected a PublishBatchError, got ${String(none)}`);
    assert.deepEqual(none.unacked.map((u) => u.turn_id), ["t0000", "t0001", "t0002"]);
    assert.equal(none.acked, 0);
    assert.ok(none.unacked[0]!.error instanceof NoRespondersError);
    await nobody.close();

    // Something answers with what a stream says when it refuses a message,
    // and something listens without answering.
    const fake = await natsConnect({ servers: proc.url });
    fake.subscribe("refused.in.*.turn", {
      callback: (_err, m) => {
        m.respond(JSON.stringify({ error: { code: 400, err_code: 10071, description: "wrong last sequence: 7" } }));
      },
    });
    fake.subscribe("slow.in.*.turn"); // listens, never answers
    await fake.flush();
    const refused = await connect({ servers: proc.url, prefix: "refused" });
    await assert.rejects(refused.publishTurn(turn("s1", 0)), (e: unknown) => {
      return e instanceof FoldstreamError && /refused\.in\.s1\.turn/.test(e.message) && /wrong last sequence: 7/.test(e.message) && /10071/.test(e.message);
    });
    await refused.close();
    const impatient = await connect({ servers: proc.url, prefix: "slow", ackTimeout: 200 });
    await assert.rejects(impatient.publishTurn(turn("s1", 0)), (e: unknown) => e instanceof TimeoutError && e.timeoutMs === 200);
    const late = await impatient.publishTurns([turn("s1", 0), turn("s1", 1)]).then(() => undefined, (e: unknown) => e);
    assert.ok(late instanceof PublishBatchError, `expected a PublishBatchError, got ${String(late)}`);
    assert.deepEqual(late.unacked.map((u) => [u.index, u.error instanceof TimeoutError]), [[0, true], [1, true]]);
    await impatient.close();
    await fake.close();
  });

  test("a wrapped connection with another inbox prefix is refused, naming inboxPrefix", async () => {
    const nc = await natsConnect({ servers: proc.url });
    assert.throws(() => FoldstreamClient.wrap(nc, { inboxPrefix: "_INBOX_bot" }), (e: unknown) => {
      return e instanceof FoldstreamError && /inboxPrefix/.test(e.message) && /"_INBOX"/.test(e.message) && /_INBOX_bot/.test(e.message);
    });
    await nc.close();
    const own = await natsConnect({ servers: proc.url, inboxPrefix: "_INBOX_bot" });
    const c = FoldstreamClient.wrap(own, { inboxPrefix: "_INBOX_bot" });
    await c.publishTurn({ session: "wrapped", turn_id: "t1", speaker: "Alice", text: "hi" });
    await c.close(); // does not close a connection it did not open
    assert.equal(own.isClosed(), false);
    await own.close();
  });
});

/** A TCP proxy to the processor's NATS port that can cut every connection through it, and take new ones again. */
class Cable {
  private server: Server | undefined;
  private readonly sockets = new Set<Socket>();
  constructor(readonly port: number, private readonly target: number) {}

  static async open(target: number): Promise<Cable> {
    const c = new Cable(await freePort(), target);
    await c.connect();
    return c;
  }

  async connect(): Promise<void> {
    this.server = createServer((client) => {
      const upstream = netConnect(this.target, "127.0.0.1");
      for (const s of [client, upstream]) {
        this.sockets.add(s);
        s.on("close", () => this.sockets.delete(s));
        s.on("error", () => s.destroy());
      }
      client.pipe(upstream).pipe(client);
      client.on("close", () => upstream.destroy());
      upstream.on("close", () => client.destroy());
    });
    await new Promise<void>((res) => this.server!.listen(this.port, "127.0.0.1", res));
  }

  async cut(): Promise<void> {
    const closed = new Promise((res) => this.server?.close(res));
    for (const s of this.sockets) s.destroy();
    await closed;
  }
}

describe("faults", { skip: missing }, () => {
  test("a connection lost in the middle of a batch reports the unacknowledged turns; publishing them again stores each once", async () => {
    const proc = await Processor.start();
    const cable = await Cable.open(proc.port);
    const fs = await connect({ servers: `nats://127.0.0.1:${cable.port}`, ackTimeout: 5000, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    const watcher = await connect({ servers: proc.url });
    try {
      const session = "cut";
      const turns = Array.from({ length: 3000 }, (_, i) => turn(session, i));
      const batch = fs.publishTurns(turns);
      // Cut the bot's connection once the first acks are in.
      const jsm = await jetstreamManager(watcher.nc);
      while ((await jsm.streams.info("FOLD_IN")).state.messages < 200) await new Promise((r) => setTimeout(r, 5));
      const status = fs.nc.status();
      const reconnected = (async () => {
        for await (const st of status) if (st.type === "reconnect") return;
      })();
      await cable.cut();
      const err = await batch.then(() => undefined, (e: unknown) => e);
      assert.ok(err instanceof PublishBatchError, `expected a PublishBatchError, got ${String(err)}`);
      assert.ok(err.unacked.length > 0, `acked ${err.acked}, unacked ${err.unacked.length}`);
      assert.equal(err.acked + err.unacked.length, turns.length);
      // Reported when the connection is lost, not after each ack's timeout.
      assert.match(err.unacked[0]!.error.message, /connection to the NATS server was lost/);
      await cable.connect();
      await reconnected;
      // What a bot does with the error: publish the unacknowledged turns
      // again until every one is acknowledged (a slow ack on a loaded
      // machine is one more round).
      let pending = err.unacked.map((u) => turns[u.index]!);
      for (let round = 0; pending.length > 0; round++) {
        assert.ok(round < 5, `${pending.length} turns still unacknowledged after 5 rounds`);
        pending = await fs.publishTurns(pending).then(
          () => [],
          (e: unknown) => {
            if (!(e instanceof PublishBatchError)) throw e;
            return e.unacked.map((u) => pending[u.index]!);
          },
        );
      }
      const s = await fs.waitCaughtUp(session, { timeout: 60000 });
      assert.equal(s.total_turns, turns.length, "every turn counted exactly once");
    } finally {
      await fs.close();
      await watcher.close();
      await cable.cut();
      await proc.close();
    }
  });

  test("watchSummaries delivers each summary once, in order, across a lost connection", async () => {
    const proc = await Processor.start();
    const cable = await Cable.open(proc.port);
    const fs = await connect({ servers: proc.url });
    const watcher = await connect({ servers: `nats://127.0.0.1:${cable.port}`, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
    const abort = new AbortController();
    try {
      const session = "watched";
      const turns = Array.from({ length: 81 }, (_, i) => turn(session, i));
      const seen: number[] = [];
      let notify: () => void = () => {};
      const watching = (async () => {
        for await (const ev of watcher.watchSummaries(session, { from: "latest", signal: abort.signal })) {
          assert.equal(ev.session, session);
          seen.push(ev.version);
          notify();
        }
      })();
      const until = (n: number) =>
        new Promise<void>((res, rej) => {
          const timer = setTimeout(() => rej(new Error(`saw versions ${JSON.stringify(seen)}, waited for ${n}`)), 30000);
          notify = () => {
            if (seen.length >= n) {
              clearTimeout(timer);
              res();
            }
          };
          notify();
        });
      await fs.publishTurns(turns.slice(0, 61)); // folds [0,10): version 1
      await until(1);
      const status = watcher.nc.status();
      const reconnected = (async () => {
        for await (const st of status) if (st.type === "reconnect") return;
      })();
      await cable.cut();
      await fs.publishTurns(turns.slice(61, 71)); // folds [10,20) while the watcher is cut off: version 2
      let st = await fs.waitCaughtUp(session);
      while (st.version < 2) st = await fs.waitCaughtUp(session);
      await cable.connect();
      await reconnected;
      await fs.publishTurns(turns.slice(71)); // version 3
      await until(3);
      abort.abort();
      await watching;
      assert.deepEqual(seen, [1, 2, 3]);
    } finally {
      abort.abort();
      await watcher.close();
      await fs.close();
      await cable.cut();
      await proc.close();
    }
  });
});
