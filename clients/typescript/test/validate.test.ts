// Validation before sending: the lone-surrogate check that stands in for
// String.prototype.isWellFormed (Node.js 20), so that validation runs the
// same on Node.js 18, and the timestamps, white space, budgets and
// queries the processor refuses.
import assert from "node:assert/strict";
import { test } from "node:test";

import { prepareNote, prepareTurn, ValidationError } from "../src/index.js";
import { contextRequest, wellFormed } from "../src/validate.js";

const cases: [string, string, boolean][] = [
  ["empty", "", true],
  ["ASCII", "Alice", true],
  ["two-byte and three-byte", "Zoë ☕ 東京", true],
  ["a pair (emoji)", "ok \u{1F600}", true],
  ["pairs back to back", "\uD83D\uDE00\uD83D\uDE01", true],
  ["the last code points", "\uFFFF\u{10FFFF}", true],
  ["a lone high surrogate", "a\uD800b", false],
  ["a lone low surrogate", "a\uDC00b", false],
  ["a high surrogate at the end", "abc\uD83D", false],
  ["a low surrogate at the start", "\uDE00abc", false],
  ["low before high", "\uDE00\uD83D", false],
  ["two highs", "\uD83D\uD83D\uDE00", false],
  ["a pair then a lone low", "\uD83D\uDE00\uDE00", false],
  ["a lone one alone", "\uDBFF", false],
];

test("wellFormed finds lone surrogates and accepts pairs", () => {
  for (const [name, s, want] of cases) {
    assert.equal(wellFormed(s), want, name);
    // The check it stands in for, where the runtime has it (Node.js 20+).
    const native = (s as { isWellFormed?: () => boolean }).isWellFormed;
    if (native) assert.equal(native.call(s), want, `${name}: String.prototype.isWellFormed`);
  }
});

test("a lone surrogate in an id, a speaker, a source or a text is refused naming the field", () => {
  const turn = { session: "s1", turn_id: "t1", speaker: "Alice", text: "Hi \u{1F600}" };
  assert.equal(prepareTurn(turn).text, "Hi \u{1F600}");
  for (const field of ["turn_id", "speaker", "text"] as const) {
    assert.throws(() => prepareTurn({ ...turn, [field]: "bad\uD800" }), (e: unknown) => e instanceof ValidationError && e.field === field, field);
  }
  const note = { session: "s1", note_id: "n1", source: "James", text: "spectating" };
  assert.equal(prepareNote(note).source, "James");
  for (const field of ["note_id", "source", "text"] as const) {
    assert.throws(() => prepareNote({ ...note, [field]: "\uDC00bad" }), (e: unknown) => e instanceof ValidationError && e.field === field, field);
  }
});

const base = { session: "s1", turn_id: "t1", speaker: "Alice", text: "Hello." };
const refuses = (field: string, code: string) => (e: unknown) => e instanceof ValidationError && e.field === field && e.code === code;

test("an at Go's RFC 3339 parser refuses, or Go's zero time, is refused naming at", () => {
  for (const at of ["2026-01-02t15:04:05z", "2026-01-02T15:04:05z", "2026-02-30T00:00:00Z", "2026-01-02T24:00:00Z", "2026-01-02T15:04:05+24:00"]) {
    assert.throws(() => prepareTurn({ ...base, at }), refuses("at", "invalid_field"), at);
  }
  assert.throws(() => prepareTurn({ ...base, at: new Date(Date.UTC(10000, 0, 1)) }), refuses("at", "invalid_field"));
  for (const at of ["0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00", new Date("0001-01-01T00:00:00Z")]) {
    assert.throws(() => prepareTurn({ ...base, at }), refuses("at", "missing_field"), String(at));
  }
  for (const at of ["2024-02-29T23:59:59.5Z", "2026-01-02T15:04:05-07:30", "0001-01-01T00:00:01Z"]) {
    assert.equal(prepareTurn({ ...base, at }).at, at);
  }
});

test("white space is what Go's strings.TrimSpace trims", () => {
  for (const field of ["text", "speaker", "turn_id"] as const) {
    assert.throws(() => prepareTurn({ ...base, [field]: "\u0085\u2028" }), refuses(field, "missing_field"), field);
    assert.doesNotThrow(() => prepareTurn({ ...base, [field]: "\uFEFF" }), field); // not white space to Go
  }
});

test("a budget past the integers JSON carries exactly is refused naming it", () => {
  for (const budget of [1e300, 2 ** 63, Number.MAX_SAFE_INTEGER + 1]) {
    assert.throws(() => contextRequest("s1", { budgetChars: budget }), refuses("budget_chars", "invalid_field"), String(budget));
    assert.throws(() => contextRequest("s1", { budgetTokens: budget }), refuses("budget_tokens", "invalid_field"), String(budget));
  }
  assert.equal(contextRequest("s1", { budgetChars: Number.MAX_SAFE_INTEGER }).budget_chars, Number.MAX_SAFE_INTEGER);
});

test("an empty context query is refused naming query; no query at all is a context without one", () => {
  assert.throws(() => contextRequest("s1", { query: "" }), refuses("query", "invalid_field"));
  assert.throws(() => contextRequest("s1", { query: "", budgetChars: 4000 }), refuses("query", "invalid_field"));
  assert.deepEqual(contextRequest("s1", {}), { session: "s1" });
  assert.deepEqual(contextRequest("s1", { query: undefined }), { session: "s1" });
  assert.deepEqual(contextRequest("s1", { query: "form" }), { session: "s1", query: "form" });
});
