// The official Tasks client (@modelcontextprotocol/ext-tasks 0.2.2) on top of the SDK client,
// with the rawDispatch recipe of the official MCP SDKs: task creation, settle() with input,
// manual snapshot/update/cancel, isolation, and detach → resume from a fresh client.

import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { JsonRpcResponseError } from "@modelcontextprotocol/ext-tasks/client";

import {
  KEYS,
  cancelRunQuietly,
  closeSession,
  events,
  getRun,
  openTaskSession,
  pollUntil,
  sleep,
  unproject,
  waitRunStatus,
} from "./lib/harness.mjs";

const ACCEPT = Object.freeze({ action: "accept", content: { action: "accept" } });
const REQUIRE_TASK = Object.freeze({ task: { preference: "require" } });
const TEST_TIMEOUT = { timeout: 30_000 };

/** Polls tasks/get through a TaskController until `pred(view)` holds. */
async function snapshotUntil(controller, what, pred, timeoutMs = 10_000) {
  return pollUntil(
    `task ${controller.taskId} ${what}`,
    async (seen) => {
      const view = await controller.snapshot();
      seen(view.status);
      return pred(view) ? view : undefined;
    },
    { timeoutMs, intervalMs: 200 },
  );
}

function interruptIdsOf(evs) {
  return evs.filter((e) => e.type === "node.suspended").map((e) => e.payload.interruptId);
}

/** Asserts a promise rejects with JSON-RPC code -32602 and returns the error. */
async function rejects32602(promise, what) {
  let caught;
  await assert.rejects(promise, (err) => {
    caught = err;
    assert.ok(err instanceof JsonRpcResponseError, `${what}: expected a JSON-RPC error, got ${err}`);
    assert.equal(err.code, -32602, `${what}: ${err.message}`);
    return true;
  });
  return caught;
}

describe("ext-tasks session against the sidecar", () => {
  test("a tasked approval call returns a task whose id is the run id; settle() answers the approval and completes it", TEST_TIMEOUT, async () => {
    const asked = [];
    const s = await openTaskSession({
      onInputRequest: async (request, ctx) => {
        asked.push({ request, ctx });
        return ACCEPT;
      },
    });
    try {
      const exec = await s.session.callTool("conformance-approval", {}, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      const taskId = exec.handle.taskId;
      // taskId = projected run id with an unguessable (≥ 22 char) opaque segment.
      assert.match(unproject(taskId), /^[A-Za-z0-9._~-]{1,128}\/[A-Za-z0-9._~-]{22,128}$/, taskId);
      assert.equal((await getRun(taskId)).workflowId, "conformance-approval");

      const { outcome } = await exec.settle();
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.notEqual(outcome.result.isError, true, JSON.stringify(outcome.result));

      assert.equal(asked.length, 1, "onInputRequest was called once");
      assert.equal(asked[0].request.kind, "elicitation");
      assert.equal(asked[0].ctx.delivery, "task-update");
      const evs = await events(taskId);
      assert.deepEqual([asked[0].ctx.inputId], interruptIdsOf(evs), "the input key is the interruptId");
      assert.equal(evs.filter((e) => e.type === "interrupt.resolved").length, 1);
      assert.equal((await getRun(taskId)).status, "completed");
    } finally {
      await closeSession(s);
    }
  });

  test("a failing workflow run as a task ends completed with isError true (not failed)", TEST_TIMEOUT, async () => {
    const s = await openTaskSession();
    try {
      // failing_job fails after about a second: conformance-failure fails at once, within the
      // sidecar's immediate-result window, and would be answered without a task.
      const exec = await s.session.callTool("failing_job", {}, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      const { outcome, lastTask } = await exec.settle();
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.equal(outcome.result.isError, true, JSON.stringify(outcome.result));
      if (lastTask) assert.equal(lastTask.status, "completed");
      assert.equal((await getRun(exec.handle.taskId)).status, "failed");
    } finally {
      await closeSession(s);
    }
  });

  test("manual control: snapshot() shows the pending approval keyed by interruptId, update() answers it", TEST_TIMEOUT, async () => {
    const s = await openTaskSession();
    let taskId;
    try {
      const exec = await s.session.callTool("conformance-approval", {}, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      taskId = exec.handle.taskId;
      await exec.detach();
      const task = s.session.task(taskId);

      const pending = await snapshotUntil(task, "to need input", (v) => v.status === "input_required");
      const keys = Object.keys(pending.raw.inputRequests ?? {});
      assert.deepEqual(keys, interruptIdsOf(await events(taskId)), "inputRequests keyed by the open interruptId");
      const req = pending.raw.inputRequests[keys[0]];
      assert.equal(req.method, "elicitation/create");
      assert.equal(pending.raw.resultType, "complete");
      assert.equal("requestState" in pending.raw, false, "no requestState on a task");

      // tasks/get is a pure read: polling appends nothing to the run's log.
      const before = (await events(taskId)).length;
      await task.snapshot();
      await task.snapshot();
      assert.equal((await events(taskId)).length, before, "tasks/get appended events");

      await task.update({ [keys[0]]: ACCEPT });
      // A repeated answer to an already-resolved key is acknowledged and resolves nothing.
      await task.update({ [keys[0]]: ACCEPT });
      const done = await snapshotUntil(task, "to complete", (v) => v.status === "completed");
      assert.notEqual(done.raw.result?.isError, true, JSON.stringify(done.raw));
      assert.equal(done.raw.result?.resultType, "complete", "inlined result carries resultType complete");
      assert.equal((await getRun(taskId)).status, "completed");
      assert.equal((await events(taskId)).filter((e) => e.type === "interrupt.resolved").length, 1);
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await closeSession(s);
    }
  });

  test("cancel() on a waiting task cancels the run; a second cancel is acknowledged and changes nothing", TEST_TIMEOUT, async () => {
    const s = await openTaskSession();
    let taskId;
    try {
      const exec = await s.session.callTool("conformance-approval", {}, REQUIRE_TASK);
      taskId = exec.handle.taskId;
      await exec.detach();
      const task = s.session.task(taskId);
      await snapshotUntil(task, "to need input", (v) => v.status === "input_required");

      await task.cancel();
      const run = await waitRunStatus(taskId, ["completed", "failed", "cancelled"], 10_000);
      assert.equal(run.status, "cancelled");
      assert.equal((await task.snapshot()).status, "cancelled");

      const before = (await events(taskId)).length;
      await task.cancel();
      assert.equal((await events(taskId)).length, before, "cancelling a cancelled task appended events");
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await closeSession(s);
    }
  });

  test("only the eligible approver's tasks/update resolves an approvers-listed gate", TEST_TIMEOUT, async () => {
    const owner = await openTaskSession({ key: KEYS.acme });
    const approver = await openTaskSession({ key: KEYS.acmeApprover });
    let taskId;
    try {
      const exec = await owner.session.callTool("conformance-approval-approvers", {}, REQUIRE_TASK);
      taskId = exec.handle.taskId;
      await exec.detach();
      const task = owner.session.task(taskId);
      const pending = await snapshotUntil(task, "to need input", (v) => v.status === "input_required");
      const key = Object.keys(pending.raw.inputRequests)[0];

      // The owner is not on the approvers list: acknowledged (or -32602), never resolved.
      try {
        await task.update({ [key]: ACCEPT });
      } catch (err) {
        assert.equal(err.code, -32602, `ineligible update: ${err}`);
      }
      await sleep(750); // a negative check: give a wrong resolution time to show
      assert.equal((await getRun(taskId)).status, "waiting-approval");
      assert.equal((await events(taskId)).filter((e) => e.type === "interrupt.resolved").length, 0);

      await approver.session.task(taskId).update({ [key]: ACCEPT });
      assert.equal((await waitRunStatus(taskId, ["completed", "failed", "cancelled"], 10_000)).status, "completed");
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await closeSession(owner);
      await closeSession(approver);
    }
  });

  test("an unknown task id is a -32602 error", TEST_TIMEOUT, async () => {
    const s = await openTaskSession();
    try {
      const fabricated = "acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ";
      await rejects32602(s.session.task(fabricated).snapshot(), "tasks/get of a fabricated id");
      await rejects32602(s.session.task(fabricated).cancel(), "tasks/cancel of a fabricated id");
    } finally {
      await closeSession(s);
    }
  });

  test("another tenant cannot read or cancel a task, and cannot tell it exists", TEST_TIMEOUT, async () => {
    const owner = await openTaskSession({ key: KEYS.acme });
    const other = await openTaskSession({ key: KEYS.globex });
    let taskId;
    try {
      const exec = await owner.session.callTool("conformance-approval", {}, REQUIRE_TASK);
      taskId = exec.handle.taskId;
      await exec.detach();
      await snapshotUntil(owner.session.task(taskId), "to need input", (v) => v.status === "input_required");

      const foreign = await rejects32602(other.session.task(taskId).snapshot(), "tasks/get by another tenant");
      const missing = await rejects32602(
        other.session.task("globex~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ").snapshot(),
        "tasks/get of a nonexistent id",
      );
      assert.deepEqual(
        { code: foreign.code, message: foreign.message, data: foreign.data },
        { code: missing.code, message: missing.message, data: missing.data },
        "a foreign task reads exactly like a missing one",
      );
      await rejects32602(other.session.task(taskId).cancel(), "tasks/cancel by another tenant");
      assert.equal((await getRun(taskId)).status, "waiting-approval", "the foreign cancel touched the run");
    } finally {
      if (taskId) await cancelRunQuietly(taskId);
      await closeSession(owner);
      await closeSession(other);
    }
  });

  test("detach and resume: a task started by one client is driven to completion by a fresh client", TEST_TIMEOUT, async () => {
    const first = await openTaskSession();
    let reference;
    let taskId;
    try {
      const exec = await first.session.callTool("conformance-approval", {}, REQUIRE_TASK);
      assert.equal(exec.kind, "task");
      taskId = exec.handle.taskId;
      reference = exec.serializeReference();
      await exec.detach();
      // ext-tasks 0.2.2 quirk: session.close() cancels every execution it still tracks, and a
      // detached one leaves that set only once its local outcome settled — so closing straight
      // after detach() sends tasks/cancel. Wait for the local outcome first.
      await exec.result().catch(() => {});
    } finally {
      await closeSession(first);
    }
    // The first client is gone; the run must still be waiting for its approval.
    assert.equal(
      (await waitRunStatus(taskId, ["waiting-approval", "completed", "failed", "cancelled"], 10_000)).status,
      "waiting-approval",
    );

    const asked = [];
    const second = await openTaskSession({
      onInputRequest: async (request, ctx) => {
        asked.push(ctx.inputId);
        return ACCEPT;
      },
    });
    try {
      const resumed = await second.session.resumeTask(JSON.parse(JSON.stringify(reference)));
      assert.equal(resumed.kind, "task");
      assert.equal(resumed.handle.taskId, taskId);
      const { outcome } = await resumed.settle();
      assert.equal(outcome.status, "completed", JSON.stringify(outcome));
      assert.notEqual(outcome.result.isError, true);
      assert.equal(asked.length, 1, "the fresh client answered the approval");
      assert.equal((await getRun(taskId)).status, "completed");
    } finally {
      await cancelRunQuietly(taskId);
      await closeSession(second);
    }
  });
});
