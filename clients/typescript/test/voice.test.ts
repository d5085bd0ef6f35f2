// buildContextMessages and the OpenAI example against a real processor and
// a fake chat-completions server (the real OpenAI SDK talks to it over HTTP).
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import OpenAI from "openai";

import { buildContextMessages, connect, SCREEN_NOTES_HEADER } from "../src/index.js";
import type { ContextReply } from "../src/index.js";
import { reply } from "../examples/openai-voice.js";
import { missing, Processor } from "./harness.js";

test("buildContextMessages lays out system prompt, summary, screen notes, recent turns and the current turn", () => {
  const context: Pick<ContextReply, "summary" | "turns"> = {
    summary: { text: "Earlier in this session: Alice and Bob picked Tokyo.", summary: "Alice and Bob picked Tokyo.", version: 1, covered_through_turn: 9, chars: 52, tokens: 14 },
    turns: [
      { index: 10, turn_id: "t10", speaker: "Alice", role: "user", text: "Ready?", at: "2026-11-22T20:00:00Z", chars: 14, tokens: 4 },
      { index: 11, turn_id: "t11", speaker: "Bot", role: "assistant", text: "Ready.", at: "2026-11-22T20:00:10Z", chars: 12, tokens: 3 },
      { index: 12, turn_id: "t12", speaker: "Bob (assistant)", role: "user", text: "Who\nwins?", at: "2026-11-22T20:00:20Z", chars: 16, tokens: 4 },
    ],
  };
  const msgs = buildContextMessages({
    system: "You are Clanky.",
    context,
    screenNotes: [{ source: "James", text: "spectating a match on the Tokyo map" }, "the scoreboard shows 2-1"],
    current: { speaker: "Bob (assistant)", text: "Who\nwins?", turn_id: "t12" },
  });
  assert.deepEqual(msgs, [
    {
      role: "system",
      content: `You are Clanky.\n\nEarlier in this session: Alice and Bob picked Tokyo.\n\n${SCREEN_NOTES_HEADER}\n- James: spectating a match on the Tokyo map\n- the scoreboard shows 2-1`,
    },
    { role: "user", content: "Alice: Ready?" },
    { role: "assistant", content: "Ready." },
    { role: "user", content: "Bob: Who ⏎ wins?" }, // the current turn once, last, its name unable to forge a role
  ]);
});

test("the OpenAI example answers with foldstream's context and publishes the answer", { skip: missing }, async () => {
  const requests: { messages: { role: string; content: string }[]; model: string }[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      assert.equal(req.url, "/v1/chat/completions");
      requests.push(JSON.parse(body));
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({
        id: "chatcmpl-1", object: "chat.completion", created: 0, model: "fake",
        choices: [{ index: 0, finish_reason: "stop", message: { role: "assistant", content: "The form is due Friday." } }],
      }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const proc = await Processor.start();
  const fs = await connect({ servers: proc.url });
  try {
    const session = "voice";
    const t0 = Date.parse("2026-11-22T20:00:00Z");
    await fs.publishTurns(Array.from({ length: 61 }, (_, i) => ({
      session, turn_id: `t${i}`, speaker: i % 2 ? "Bob" : "Alice", at: new Date(t0 + i * 10000),
      text: i === 5 ? "Can someone send the tournament form by Friday?" : `Turn ${i} about the ranked match on Tokyo.`,
    })));
    let s = await fs.waitCaughtUp(session);
    while (s.version < 1) s = await fs.waitCaughtUp(session);

    const openai = new OpenAI({ apiKey: "test", baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, maxRetries: 0 });
    const answer = await reply({
      fs, openai, model: "gpt-4o-mini", system: "You are Clanky.", session, speaker: "Carol", text: "When is the tournament form due?",
      turnId: "u1", screenNotes: [{ source: "Carol", text: "the sign-up page is open" }],
    });
    assert.equal(answer, "The form is due Friday.");
    assert.equal(requests.length, 1);
    const msgs = requests[0]!.messages;
    assert.equal(requests[0]!.model, "gpt-4o-mini");
    assert.equal(msgs[0]!.role, "system");
    assert.ok(msgs[0]!.content.startsWith("You are Clanky.\n\nEarlier in this session: "));
    assert.ok(msgs[0]!.content.includes("Can someone send the tournament form by Friday?"), "the recalled excerpt is in the prompt");
    assert.ok(msgs[0]!.content.endsWith(`${SCREEN_NOTES_HEADER}\n- Carol: the sign-up page is open`));
    assert.deepEqual(msgs.at(-1), { role: "user", content: "Carol: When is the tournament form due?" });
    assert.equal(msgs.filter((m) => m.content === "Carol: When is the tournament form due?").length, 1);
    s = await fs.waitCaughtUp(session);
    assert.equal(s.total_turns, 63, "the utterance and the answer were published");
  } finally {
    await fs.close();
    await proc.close();
    server.close();
  }
});
