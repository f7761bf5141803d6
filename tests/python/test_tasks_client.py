"""clients/python (`openwop_mcp_tasks`, installed into the suite's venv by run.sh as a user
installs it) against the demo: a task with an approval, cancel, a wait that times out and is
resumed by id from another client, input left to the caller, and a task that outlives every
common HTTP read timeout at the package's defaults. Each outcome is checked against the host's
own record of the run (GET /runs/{id} through the passthrough)."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx2
import pytest
from openwop_mcp_tasks import (
    DEFAULT_HTTP_TIMEOUT,
    McpError,
    TaskCancelled,
    TaskInputRequired,
    TasksClient,
    TaskWaitTimeout,
)

from support import KEYS, MCP_URL, cancel_run_quietly, events, get_run, unproject, wait_run_status

pytestmark = pytest.mark.anyio

ACCEPT = {"action": "accept", "content": {"action": "accept"}}


def client(key: str = KEYS["acme"], **kwargs: Any) -> TasksClient:
    return TasksClient(MCP_URL, token=key, **kwargs)


async def test_an_approval_task_asks_through_on_input_and_completes() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def approve(key: str, request: dict[str, Any]) -> dict[str, Any]:
        asked.append((key, request))
        return ACCEPT

    async with client() as tasks:
        started = await tasks.start_tool("conformance-approval", {})
        assert started.task_id is not None and started.created is not None, started
        assert started.created["resultType"] == "task"
        run_id = unproject(started.task_id)
        assert (await get_run(run_id))["workflowId"] == "conformance-approval"

        final = await tasks.wait(started.task_id, on_input=approve)

    assert final["status"] == "completed", final
    assert final["result"]["isError"] is False, final
    assert len(asked) == 1, asked
    key, request = asked[0]
    assert request["method"] == "elicitation/create", request
    suspended = [e["payload"]["interruptId"] for e in await events(run_id) if e["type"] == "node.suspended"]
    assert [key] == suspended, "the input request is keyed by the run's interrupt"
    assert (await get_run(run_id))["status"] == "completed"
    assert len([e for e in await events(run_id) if e["type"] == "interrupt.resolved"]) == 1


async def test_call_tool_returns_the_final_result_and_sends_the_2026_07_28_headers() -> None:
    sent: list[httpx2.Request] = []

    async def record(request: httpx2.Request) -> None:
        sent.append(request)

    async with httpx2.AsyncClient(event_hooks={"request": [record]}) as http:
        tasks = TasksClient(MCP_URL, headers={"Authorization": f"Bearer {KEYS['acme']}"}, http=http)
        result = await tasks.call_tool("conformance-approval", {}, on_input=lambda _k, _r: ACCEPT)
    assert result["isError"] is False, result
    assert (await get_run(result["structuredContent"]["runId"]))["status"] == "completed"

    methods = [r.headers["mcp-method"] for r in sent]
    assert methods[0] == "tools/call" and "tasks/get" in methods and "tasks/update" in methods, methods
    for request in sent:
        body = json.loads(request.content)
        assert request.headers["mcp-protocol-version"] == "2026-07-28"
        assert request.headers["mcp-method"] == body["method"]
        want_name = body["params"]["name"] if body["method"] == "tools/call" else body["params"]["taskId"]
        assert request.headers["mcp-name"] == want_name
        meta = body["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert "io.modelcontextprotocol/tasks" in meta["io.modelcontextprotocol/clientCapabilities"]["extensions"]


async def test_cancel_ends_the_task_and_the_run_cancelled_and_result_names_the_task() -> None:
    async with client() as tasks:
        started = await tasks.start_tool("conformance-cancellable", {})
        assert started.task_id is not None, started
        run_id = unproject(started.task_id)
        try:
            ack = await tasks.cancel(started.task_id)
            assert ack.get("resultType") == "complete", ack
            with pytest.raises(TaskCancelled) as caught:
                await tasks.result(started.task_id, timeout=15)
            assert caught.value.task_id == started.task_id
            assert caught.value.task["status"] == "cancelled"
            assert (await wait_run_status(run_id))["status"] == "cancelled"
        finally:
            await cancel_run_quietly(run_id)


async def test_a_wait_timeout_names_the_task_and_another_client_resumes_it_to_completion() -> None:
    async with client() as first:
        started = await first.start_tool("conformance-delay", {"delayMs": 4000})
        assert started.task_id is not None, started
        began = time.monotonic()
        with pytest.raises(TaskWaitTimeout) as caught:
            await first.wait(started.task_id, timeout=0.5)
        assert time.monotonic() - began < 3, "the wait ended at the caller's timeout"
    err = caught.value
    assert isinstance(err, TimeoutError), "callers catching TimeoutError still catch it"
    assert err.task_id == started.task_id, err
    assert err.last_status == "working", err.task
    assert started.task_id in str(err)
    run_id = unproject(started.task_id)
    assert (await get_run(run_id))["status"] not in ("cancelled", "failed"), "giving up waiting left the run alone"

    # The first client is closed: a new one resumes by the id the error carried.
    async with client() as second:
        result = await second.result(err.task_id)
    assert result["isError"] is False, result
    assert (await get_run(run_id))["status"] == "completed"


async def test_input_without_a_callback_is_handed_to_the_caller_who_answers_with_update() -> None:
    async with client() as tasks:
        started = await tasks.start_tool("conformance-approval", {})
        assert started.task_id is not None
        run_id = unproject(started.task_id)
        try:
            with pytest.raises(TaskInputRequired) as caught:
                await tasks.wait(started.task_id, timeout=15)
            assert caught.value.task_id == started.task_id
            (key,) = caught.value.input_requests
            await tasks.update(started.task_id, {key: ACCEPT})
            final = await tasks.wait(started.task_id, timeout=15)
            assert final["status"] == "completed", final
        finally:
            await cancel_run_quietly(run_id)


async def test_a_clarification_form_is_answered_through_on_input() -> None:
    seen: list[dict[str, Any]] = []

    def answer(_key: str, request: dict[str, Any]) -> dict[str, Any]:
        # A plain function works as well as a coroutine.
        seen.append(request)
        props = request["params"]["requestedSchema"]["properties"]
        return {"action": "accept", "content": {k: "blue" for k in props}}

    async with client() as tasks:
        result = await tasks.call_tool("conformance-clarification", {}, on_input=answer, timeout=30)
    assert result["isError"] is False, result
    assert len(seen) == 1 and seen[0]["method"] == "elicitation/create", seen
    assert (await get_run(result["structuredContent"]["runId"]))["status"] == "completed"


async def test_task_errors_carry_the_task_id() -> None:
    async with client() as tasks:
        with pytest.raises(McpError) as unknown:
            await tasks.get("acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ")
        assert unknown.value.code == -32602
        assert unknown.value.task_id == "acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ"

        started = await tasks.start_tool("conformance-approval", {})
        assert started.task_id is not None
    try:
        # Another tenant's task is indistinguishable from an unknown one (ext-tasks "Security").
        async with client(KEYS["globex"]) as other:
            with pytest.raises(McpError) as foreign:
                await other.cancel(started.task_id)
        assert foreign.value.code == -32602 and foreign.value.task_id == started.task_id
        assert (await get_run(unproject(started.task_id)))["status"] not in ("cancelled", "completed", "failed")
    finally:
        await cancel_run_quietly(unproject(started.task_id))


async def test_an_answer_the_sidecar_streams_as_sse_is_read_to_its_response() -> None:
    # Without the Tasks extension the call blocks; past the sidecar's JSON window the answer
    # comes as an event stream (keep-alive comments, then the response), read at the defaults.
    sent: list[httpx2.Response] = []

    async def record(response: httpx2.Response) -> None:
        sent.append(response)

    async with httpx2.AsyncClient(timeout=DEFAULT_HTTP_TIMEOUT, event_hooks={"response": [record]}) as http:
        plain = TasksClient(MCP_URL, token=KEYS["acme"], http=http, capabilities={})
        started = await plain.start_tool("slow_compute", {"seconds": 7, "label": "sse"})
    assert started.task_id is None and started.result is not None, started
    assert started.result["content"][0]["text"] == "slow_compute sse finished after 7 s"
    assert sent[-1].headers["content-type"].startswith("text/event-stream")


@pytest.mark.timeout(90)
async def test_a_25_s_task_completes_at_the_package_defaults() -> None:
    # No wait timeout and the package's HTTP timeouts: longer than httpx2's bare 5 s default and
    # than the 20 s the suite's old copied helper allowed. (tests/e2e/long-call.test.mjs waits
    # on a 2-minute task with the TypeScript dispatcher; that runner runs beside the others.)
    async with client() as tasks:
        began = time.monotonic()
        result = await tasks.call_tool("slow_compute", {"seconds": 25, "label": "py-task"})
    assert time.monotonic() - began >= 25
    assert result["isError"] is False, result
    assert result["content"][0]["text"] == "slow_compute py-task finished after 25 s"
