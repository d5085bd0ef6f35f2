/**
 * `@foldstream/client`: the TypeScript client of foldstream, wire contract
 * v1. A bot publishes its turns, screen-watch notes and control events; a
 * prompt builder asks for the session's packed context (summary, recalled
 * facts and excerpts, recent turns) and renders it as chat messages or
 * prompt text, watches summary updates, and recalls earlier turns.
 *
 * ```ts
 * import { connect } from "@foldstream/client";
 * const fs = await connect({ servers: "nats://127.0.0.1:4222" });
 * await fs.publishTurn({ session: "s1", turn_id: "t1", speaker: "Alice", text: "Hi" });
 * const ctx = await fs.context("s1", { query: "Hi", budgetChars: 4000 });
 * ctx.messages(); // OpenAI chat-completions messages
 * await fs.close();
 * ```
 *
 * @packageDocumentation
 */

export { connect, FoldstreamClient, DEFAULT_PREFIX, SERVICE_NAME, turnMsgId, noteMsgId, streamName } from "./client.js";
export type { ClientOptions, ConnectOptions, WatchOptions, WatchStart, Published, BatchResult } from "./client.js";
export { Context } from "./context.js";
export {
  FoldstreamError,
  ValidationError,
  ServiceError,
  BadRequestError,
  UnknownSessionError,
  UnavailableError,
  InternalServiceError,
  TimeoutError,
  NoRespondersError,
  InboxPermissionError,
  PublishBatchError,
  ClosedError,
} from "./errors.js";
export type { UnackedEvent } from "./errors.js";
export {
  WIRE_VERSION,
  DEFAULT_LIMITS,
  MAX_TOKENS,
  ROLES,
  OPS,
  validSession,
  checkSession,
  checkSessionConfig,
  prepareTurn,
  prepareNote,
  prepareControl,
  contextRequest,
  recallRequest,
} from "./validate.js";
export type { Limits, TurnInput, NoteInput, Op, Role, ContextOptions, RecallOptions, RecallScope } from "./validate.js";
export {
  SUMMARY_PREFIX,
  MEMORIES_HEADER,
  EXCERPTS_HEADER,
  RECENT_HEADER,
  speakerName,
  turnLine,
  contextTurnLine,
  recalledLine,
  recalledLines,
  contextText,
  contextMessages,
} from "./render.js";
export type { ChatMessage } from "./render.js";
export { buildContextMessages, SCREEN_NOTES_HEADER } from "./voice.js";
export type { VoiceContextInput, ScreenNote, CurrentTurn } from "./voice.js";
export type * from "./wire.js";
