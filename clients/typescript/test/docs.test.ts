// docs/clients.md's TypeScript quick start works as printed: saved in the
// package directory and run with node against a processor.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { missing, Processor, repoRoot } from "./harness.js";

test("the TypeScript quick start of docs/clients.md", { skip: missing }, async () => {
  const doc = readFileSync(join(repoRoot, "docs", "clients.md"), "utf8");
  const section = doc.slice(doc.indexOf("<!-- typescript: begin -->"), doc.indexOf("<!-- typescript: end -->"));
  const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(code, "no js block in the TypeScript section");
  assert.ok(code.trimEnd().split("\n").length <= 15, "the quick start is longer than 15 lines");
  const proc = await Processor.start();
  const file = join(repoRoot, "clients", "typescript", `quickstart-test-${process.pid}.mjs`);
  try {
    writeFileSync(file, code.replace("nats://127.0.0.1:4222", proc.url));
    const r = spawnSync(process.execPath, [file], { encoding: "utf8", timeout: 60000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /Alice: I'm flying to Lisbon on May 3rd\./);
    assert.match(r.stdout, /^2 messages$/m);
  } finally {
    rmSync(file, { force: true });
    await proc.close();
  }
});
