// examples/task.mjs, which README.md shows, runs a task to completion against the demo with the
// official TypeScript client and Tasks client at the versions this suite pins.

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { MCP_URL, KEYS } from "./lib/harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const EXAMPLE = path.join(HERE, "..", "..", "examples", "task.mjs");

test("the README's TypeScript example runs a task to completion", { timeout: 45_000 }, async () => {
  // A copy beside this suite's node_modules, where its imports resolve.
  const dir = fs.mkdtempSync(path.join(HERE, ".example-"));
  try {
    const copy = path.join(dir, "task.mjs");
    fs.copyFileSync(EXAMPLE, copy);
    const { stdout } = await promisify(execFile)(process.execPath, [copy], {
      env: { ...process.env, MCP_URL, MCP_KEY: KEYS.acme },
      timeout: 40_000,
    });
    const lines = stdout.trim().split("\n");
    assert.match(lines[0], /^task: acme~2Fr-[A-Za-z0-9._~-]{22,}$/, stdout);
    assert.ok(lines.some((l) => l.startsWith("asked: Conformance approval")), stdout);
    assert.equal(lines.at(-1), "final: completed completed", stdout);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
