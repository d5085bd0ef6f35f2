// src/wire.ts is what scripts/gen-wire.mjs makes of schema/v1: a schema
// change without `npm run gen` fails here, as the Go generator's output
// fails internal/events' tests.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { test } from "node:test";
import { repoRoot } from "./harness.js";

test("src/wire.ts is generated from schema/v1", () => {
  const r = spawnSync(process.execPath, [join(repoRoot, "clients", "typescript", "scripts", "gen-wire.mjs"), "--check"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
});
