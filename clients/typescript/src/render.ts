/**
 * Rendering a context reply as prompt text and as chat messages, exactly
 * as the Go client and the `processor context` command do
 * (client.TurnLine, client.Context.Prompt, client.ExcerptRun; the rules
 * are in clients/conformance/README.md).
 *
 * @module
 */

import type { ContextReply, ContextTurn, RecalledItem } from "./wire.js";

/** The prefix of the summary layer: "Earlier in this session: ". */
export const SUMMARY_PREFIX = "Earlier in this session: ";
/** The header before recalled memories. */
export const MEMORIES_HEADER = "Remembered facts:";
/** The header before recalled earlier turns. */
export const EXCERPTS_HEADER = "Earlier excerpts (in order):";
/** The header before the verbatim turns when anything was recalled. */
export const RECENT_HEADER = "Recent turns:";
/** The longest speaker name in a prompt line, in characters. */
export const MAX_NAME_CHARS = 32;

const roleWords = new Set(["user", "assistant", "system", "developer", "tool", "function", "bot", "ai", "model", "moderator", "admin"]);
const trimmed = " -–—,;|/\\";
const brackets = new Map([
  ["(", ")"], ["[", "]"], ["{", "}"], ["（", "）"], ["【", "】"], ["［", "］"], ["｛", "｝"], ["〔", "〕"], ["⟨", "⟩"],
]);
const bracketChars = new Set([...brackets.keys(), ...brackets.values()]);
const colons = new Set([
  ":", "\uFF1A", "\uFE55", "\uFE13", "\uA789", "\u2236", "\u02F8", "\u0589", "\u05C3", "\u0703", "\u0704", "\u16EC",
  "\u1804", "\u205A", "\u02D0", "\u2982",
]);
const formatOrPrivate = /^[\p{Cf}\p{Co}]$/u;
const controlOrSpace = /^[\p{Cc}\p{White_Space}]$/u;
const loneSurrogate = /^[\uD800-\uDFFF]$/;

function trimSet(s: string, left: boolean, right: boolean): string {
  const cps = Array.from(s);
  let i = 0;
  let j = cps.length;
  while (left && i < j && trimmed.includes(cps[i]!)) i++;
  while (right && j > i && trimmed.includes(cps[j - 1]!)) j--;
  return cps.slice(i, j).join("");
}

function plain(s: string): boolean {
  if (s === "" || s.length > MAX_NAME_CHARS || trimmed.includes(s[0]!) || trimmed.includes(s[s.length - 1]!)) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (":()[]{}".includes(s[i]!) || c < 0x20 || c > 0x7e || (c === 0x20 && s.charCodeAt(i - 1) === 0x20)) return false;
  }
  return true;
}

function namesRole(inner: string): boolean {
  // As Go's strings.ToLower: U+0130 (İ) is "i", where toLowerCase() gives "i" and a combining dot.
  return inner.split(/[^\p{L}]+/u).some((w) => w !== "" && roleWords.has(w.replace(/\u0130/g, "i").toLowerCase()));
}

/**
 * A speaker's name as a prompt line shows it: on one line, without colons,
 * brackets or role tags such as "(assistant)", at most 32 characters, so
 * that a display name cannot forge a line of its own; "" when nothing is
 * left.
 */
export function speakerName(raw: string): string {
  if (plain(raw)) return raw;
  const cps = Array.from(raw);
  let out = "";
  for (let i = 0; i < cps.length; i++) {
    const r = cps[i]!;
    const closer = brackets.get(r);
    if (closer !== undefined) {
      const end = cps.indexOf(closer, i + 1);
      if (end >= 0 && namesRole(cps.slice(i + 1, end).join(""))) {
        i = end;
        out += " ";
        continue;
      }
    }
    if (r.codePointAt(0)! >= 0x80 && formatOrPrivate.test(r)) continue;
    if (loneSurrogate.test(r) || controlOrSpace.test(r) || colons.has(r) || bracketChars.has(r)) {
      out += " ";
    } else {
      out += r;
    }
  }
  const name = trimSet(out.split(/\p{White_Space}+/u).filter((w) => w !== "").join(" "), true, true);
  const n = Array.from(name);
  if (n.length <= MAX_NAME_CHARS) return name;
  let cut = n.slice(0, MAX_NAME_CHARS - 1).join("");
  const sp = cut.lastIndexOf(" ");
  if (sp >= 0 && Array.from(cut.slice(0, sp)).length >= MAX_NAME_CHARS / 2) cut = cut.slice(0, sp);
  return trimSet(cut, false, true) + "…";
}

/**
 * Every line break a reader may split on: Python's str.splitlines() set, which also holds what JavaScript and
 * Unicode-aware readers end a line on. The Go and Python clients replace the same set.
 */
const lineBreaks = /\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]/g;

/** A text on one line: its line breaks shown as " ⏎ ". */
export function oneLine(text: string): string {
  return text.replace(lineBreaks, " ⏎ ");
}

/** A turn as one prompt line: "<name>: <text>", the name normalised ({@link speakerName}, "unknown" when empty). */
export function turnLine(name: string, text: string): string {
  return `${speakerName(name) || "unknown"}: ${oneLine(text)}`;
}

/** A context turn's prompt line: its speaker's, or its role's when the speaker's name normalises to nothing. */
export function contextTurnLine(t: Pick<ContextTurn, "speaker" | "role" | "text">): string {
  if (speakerName(t.speaker ?? "") === "" && t.role) return turnLine(t.role, t.text);
  return turnLine(t.speaker ?? "", t.text);
}

const months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/** The time of a recalled item in milliseconds, or undefined when it has none. */
function itemTime(at: string | undefined): number | undefined {
  if (!at || at.startsWith("0001-01-01")) return undefined;
  const ms = Date.parse(at);
  return Number.isNaN(ms) ? undefined : ms;
}

/** A time's day as recalled lines label it: "22 Nov 2026" (UTC). */
export function recallLabel(ms: number): string {
  const d = new Date(ms);
  return `${d.getUTCDate()} ${months[d.getUTCMonth()]} ${String(d.getUTCFullYear()).padStart(4, "0")}`;
}

/** A recalled item's line where it continues a run of excerpts: without its day. */
export function recalledRunLine(r: RecalledItem): string {
  if (r.kind === "turn") return contextTurnLine({ speaker: r.speaker ?? "", role: r.role ?? "", text: r.text });
  const name = speakerName(r.speaker ?? "");
  return name ? `${name}: ${oneLine(r.text)}` : oneLine(r.text);
}

/** A recalled item as one labelled line: "[22 Nov 2026] Alice: text"; a memory after "- ". */
export function recalledLine(r: RecalledItem): string {
  const ms = itemTime(r.at);
  return (r.kind === "memory" ? "- " : "") + (ms === undefined ? "" : `[${recallLabel(ms)}] `) + recalledRunLine(r);
}

/**
 * The recalled items' lines in order: the excerpt turns said on one day
 * (UTC) are labelled with the day once, on the first of them.
 */
export function recalledLines(items: readonly RecalledItem[]): string[] {
  let day: string | undefined;
  return items.map((r) => {
    const ms = itemTime(r.at);
    if (r.kind !== "turn" || ms === undefined) {
      day = undefined;
      return recalledLine(r);
    }
    const d = recallLabel(ms);
    if (d === day) return recalledRunLine(r);
    day = d;
    return recalledLine(r);
  });
}

/** The lines before the verbatim turns: summary, eviction notes, memories and excerpts under their headers. */
export function headLines(c: Pick<ContextReply, "summary"> & Partial<Pick<ContextReply, "evictions" | "recalled">>): string[] {
  const lines: string[] = [];
  if (c.summary) lines.push(c.summary.text);
  for (const e of c.evictions ?? []) lines.push(e.text);
  const recalled = c.recalled ?? [];
  for (const [kind, header] of [["memory", MEMORIES_HEADER], ["turn", EXCERPTS_HEADER]] as const) {
    const items = recalled.filter((r) => r.kind === kind);
    if (items.length > 0) lines.push(header, ...recalledLines(items));
  }
  return lines;
}

/**
 * The context as prompt text, one line per item, each ending in "\n":
 * what the `processor context` command prints after its header line. Its
 * length in characters is the reply's `chars`.
 */
export function contextText(c: Pick<ContextReply, "summary" | "evictions" | "recalled" | "turns">): string {
  const lines = headLines(c);
  const turns = c.turns ?? [];
  if ((c.recalled ?? []).length > 0 && turns.length > 0) lines.push(RECENT_HEADER);
  for (const t of turns) lines.push(contextTurnLine(t));
  return lines.map((l) => l + "\n").join("");
}

/** A chat message, assignable to the OpenAI SDK's ChatCompletionMessageParam. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/**
 * The context as chat messages: one system message holding the summary,
 * eviction notes, remembered facts and earlier excerpts (with their dates),
 * when there are any; then each verbatim turn, an assistant's as an
 * assistant message holding its text, any other as a user message holding
 * its line ("Alice: …", so the model knows who spoke).
 */
export function contextMessages(c: Pick<ContextReply, "summary" | "evictions" | "recalled" | "turns">): ChatMessage[] {
  const out: ChatMessage[] = [];
  const head = headLines(c);
  if (head.length > 0) out.push({ role: "system", content: head.join("\n") });
  for (const t of c.turns ?? []) out.push(turnMessage(t));
  return out;
}

/** A verbatim turn as a chat message: the bot's own (role assistant) as an assistant message holding its text, any other as a user message holding its line. */
export function turnMessage(t: Pick<ContextTurn, "speaker" | "role" | "text">): ChatMessage {
  return t.role === "assistant" ? { role: "assistant", content: t.text } : { role: "user", content: contextTurnLine(t) };
}
