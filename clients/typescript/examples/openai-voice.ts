// A voice bot's reply loop with the OpenAI Node SDK: publish the user's
// final transcription, ask foldstream for the context packed for it, build
// the prompt with buildContextMessages (system prompt + session summary +
// live screen notes, recent turns, the utterance), call the model, publish
// the answer as the bot's turn.
//
//   OPENAI_API_KEY=… node dist/examples/openai-voice.js <nats-url> <session> "<what the user said>"
//
// OPENAI_BASE_URL points it at another OpenAI-compatible server, OPENAI_MODEL
// picks the model (default gpt-4o-mini).
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";

import { buildContextMessages, connect } from "../src/index.js";
import type { FoldstreamClient, ScreenNote } from "../src/index.js";

/** What one reply needs. */
export interface ReplyInput {
  fs: FoldstreamClient;
  openai: OpenAI;
  model: string;
  system: string;
  session: string;
  /** The user's utterance and its turn id. */
  speaker: string;
  text: string;
  turnId: string;
  /** Screen-watch notes still in the bot's live buffer. */
  screenNotes?: ScreenNote[];
  /** The most characters of foldstream's context in the prompt. */
  budgetChars?: number;
}

/** Publishes the utterance, asks the model with foldstream's context, publishes and returns the answer. */
export async function reply(r: ReplyInput): Promise<string> {
  await r.fs.publishTurn({ session: r.session, turn_id: r.turnId, speaker: r.speaker, text: r.text });
  const context = await r.fs.context(r.session, { query: r.text, budgetChars: r.budgetChars ?? 6000 });
  const messages: ChatCompletionMessageParam[] = buildContextMessages({
    system: r.system,
    context,
    screenNotes: r.screenNotes ?? [],
    current: { speaker: r.speaker, text: r.text, turn_id: r.turnId },
  });
  const completion = await r.openai.chat.completions.create({ model: r.model, messages });
  const answer = completion.choices[0]?.message.content ?? "";
  if (answer.trim() !== "") {
    await r.fs.publishTurn({ session: r.session, turn_id: `${r.turnId}-reply`, speaker: "Bot", role: "assistant", text: answer });
  }
  return answer;
}

// Run as a program (not when imported by the tests).
if (process.argv[1]?.endsWith("openai-voice.js")) {
  const [url, session, text] = process.argv.slice(2);
  if (!url || !session || !text) {
    console.error('usage: node dist/examples/openai-voice.js <nats-url> <session> "<what the user said>"');
    process.exit(1);
  }
  const fs = await connect({ servers: url });
  const openai = new OpenAI({ baseURL: process.env.OPENAI_BASE_URL });
  const answer = await reply({
    fs, openai, model: process.env.OPENAI_MODEL ?? "gpt-4o-mini", session, speaker: "User", text, turnId: `u-${Date.now()}`,
    system: "You are a friendly voice assistant in a group call. Answer in one or two short sentences.",
  });
  console.log(answer);
  await fs.close();
}
