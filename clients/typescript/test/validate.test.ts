// The lone-surrogate check that stands in for String.prototype.isWellFormed
// (Node.js 20), so that validation runs the same on Node.js 18.
import assert from "node:assert/strict";
import { test } from "node:test";

import { prepareNote, prepareTurn, ValidationError } from "../src/index.js";
import { wellFormed } from "../src/validate.js";

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
