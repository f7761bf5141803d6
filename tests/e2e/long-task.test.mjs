// A 2-minute task through the repository's dispatcher (clients/typescript) and the official
// Tasks client, every option at its default: no wait timeout, no request timeout. Longer than
// any common client read timeout (fetch's own is 300 s of silence; each tasks/get here answers
// at once), and than the 20 s the suite's old copied helper allowed.
//
// tests/e2e/run.sh runs this file in the runner of long-call.test.mjs, concurrently with the
// other files, so its two minutes overlap the rest of the suite.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { createTaskSessionFromClient } from "@modelcontextprotocol/ext-tasks/client";
import { TASKS_CAPABILITIES, taskSessionOptions, waitForTask } from "@openwop/mcp-tasks";

import { CLIENT_INFO, KEYS, MCP_URL, cancelRunQuietly, getRun } from "./lib/harness.mjs";

test("a 2-minute task completes at the package's and the SDK's default options", { timeout: 180_000 }, async () => {
  const client = new Client(CLIENT_INFO, { capabilities: TASKS_CAPABILITIES, versionNegotiation: { mode: "auto" } });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(MCP_URL), { requestInit: { headers: { Authorization: `Bearer ${KEYS.acme}` } } }),
  );
  const session = createTaskSessionFromClient(client, taskSessionOptions({ url: MCP_URL, token: KEYS.acme, clientInfo: CLIENT_INFO }));
  let taskId;
  try {
    const started = Date.now();
    const exec = await session.callTool("slow_compute", { seconds: 120, label: "ts-task" }, { task: { preference: "require" } });
    assert.equal(exec.kind, "task");
    taskId = exec.handle.taskId;
    const { outcome } = await waitForTask(exec);
    const took = Date.now() - started;
    assert.equal(outcome.status, "completed", JSON.stringify(outcome));
    assert.equal(outcome.result.content[0].text, "slow_compute ts-task finished after 120 s");
    assert.ok(took >= 120_000, `the outcome is the run's, after ${took} ms`);
    assert.equal((await getRun(taskId)).status, "completed");
  } finally {
    if (taskId) await cancelRunQuietly(taskId);
    await session.close();
    await client.close();
  }
});
