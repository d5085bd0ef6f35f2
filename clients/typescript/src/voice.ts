/**
 * The prompt builder of a voice bot: the model's messages for its next
 * reply from foldstream's packed context, the bot's live screen-watch
 * notes and the user's current utterance. It lays them out as the voice
 * bot foldstream was designed from does in its buildContextMessages():
 * the system prompt with the session summary ("Earlier in this session:
 * …") and the screen notes, then the verbatim turns from the cursor, then
 * the current turn.
 *
 * @module
 */

import { contextTurnLine, headLines, oneLine, speakerName, turnMessage } from "./render.js";
import type { ChatMessage } from "./render.js";
import type { ContextReply } from "./wire.js";

/** A screen-watch note still in the bot's live buffer. */
export interface ScreenNote {
  /** What was on screen, e.g. "James is spectating a match on the Tokyo map". */
  text: string;
  /** Whose screen or which capture, e.g. "James's stream". */
  source?: string;
  /** When it was seen. */
  at?: Date | string;
}

/** The user's utterance the model is about to answer. */
export interface CurrentTurn {
  speaker: string;
  text: string;
  /** When the bot already published it, its turn_id: it is then not repeated from the context's turns. */
  turn_id?: string;
}

/** What {@link buildContextMessages} builds from. */
export interface VoiceContextInput {
  /** The bot's own system prompt (persona, rules). */
  system: string;
  /** The session's context: `await fs.context(session, { query: current.text, budgetChars })`. */
  context: Pick<ContextReply, "summary" | "turns"> & Partial<Pick<ContextReply, "evictions" | "recalled">>;
  /** Screen-watch notes still in the live buffer, oldest first (those evicted went to foldstream as notes). */
  screenNotes?: readonly (ScreenNote | string)[];
  /** The utterance to answer, last. */
  current?: CurrentTurn;
  /** Keep at most this many of the context's newest verbatim turns (default: all of them). */
  maxTurns?: number;
}

/** The header of the screen notes section of the system message. */
export const SCREEN_NOTES_HEADER = "Screen-watch notes (oldest first):";

function noteLine(n: ScreenNote | string): string {
  if (typeof n === "string") return `- ${oneLine(n)}`;
  const source = n.source ? speakerName(n.source) : "";
  return `- ${source ? `${source}: ` : ""}${oneLine(n.text)}`;
}

/**
 * Builds the messages of a voice bot's next model call, as OpenAI
 * chat-completions message params (pass them to
 * `openai.chat.completions.create({ model, messages })`):
 *
 * 1. one system message: the bot's system prompt; then the summary of the
 *    turns before the cursor ("Earlier in this session: …") or, in mode
 *    evict, the eviction note; then, for a question-aware context, the
 *    remembered facts and earlier excerpts with their dates; then the
 *    live screen-watch notes;
 * 2. the verbatim turns from the cursor, oldest first: the bot's own
 *    (role assistant) as assistant messages, everyone else's as user
 *    messages "Name: text";
 * 3. the current utterance as the last user message, unless the context
 *    already ends with it (same turn_id).
 */
export function buildContextMessages(input: VoiceContextInput): ChatMessage[] {
  const { context: c } = input;
  const sections: string[] = [];
  if (input.system.trim() !== "") sections.push(input.system.trim());
  const continuity = headLines(c);
  if (continuity.length > 0) sections.push(continuity.join("\n"));
  const notes = input.screenNotes ?? [];
  if (notes.length > 0) sections.push([SCREEN_NOTES_HEADER, ...notes.map(noteLine)].join("\n"));

  const out: ChatMessage[] = [];
  if (sections.length > 0) out.push({ role: "system", content: sections.join("\n\n") });
  let turns = c.turns ?? [];
  const current = input.current;
  if (current?.turn_id !== undefined && turns.length > 0 && turns[turns.length - 1]!.turn_id === current.turn_id) {
    turns = turns.slice(0, -1);
  }
  if (input.maxTurns !== undefined && turns.length > input.maxTurns) turns = turns.slice(turns.length - Math.max(0, input.maxTurns));
  for (const t of turns) out.push(turnMessage(t));
  if (current) out.push({ role: "user", content: contextTurnLine({ speaker: current.speaker, role: "user", text: current.text }) });
  return out;
}
