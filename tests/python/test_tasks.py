"""The Tasks extension (`io.modelcontextprotocol/tasks`, ext-tasks) from the Python SDK.

`mcp` 2.3.0 has no Tasks client; `openwop_mcp_tasks.mcp_sdk` (clients/python, installed into the
venv by run.sh) builds one on the SDK's extension API (`ClientExtension` + a `ResultClaim` for
`resultType: "task"`), sending `tasks/get`, `tasks/update` and `tasks/cancel` through
`ClientSession.send_request`. Each task is checked
against the host's own record of the run (`GET /runs/{id}` through the passthrough)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError
from openwop_mcp_tasks import TaskWaitTimeout

from support import KEYS, TERMINAL, cancel_run_quietly, connect, events, get_run, unproject, wait_run_status
from openwop_mcp_tasks.mcp_sdk import (
    CreateTaskResult,
    TasksExtension,
    cancel_task,
    get_task,
    settle,
    update_task,
)

pytestmark = pytest.mark.anyio

ACCEPT = types.ElicitResult(action="accept", content={"action": "accept"})


async def accept(_ctx: Any, _params: types.ElicitRequestParams) -> types.ElicitResult:
    return ACCEPT


async def task_until(session: Any, task_id: str, status: str, *, timeout_s: float = 10.0) -> dict[str, Any]:
    last = None
    try:
        with anyio.fail_after(timeout_s):
            while True:
                task = await get_task(session, task_id)
                last = task["status"]
                if last == status:
                    return task
                await anyio.sleep(0.1)
    except TimeoutError:
        raise AssertionError(f"task {task_id} did not reach {status} in {timeout_s}s; last {last}")


async def test_tasked_call_returns_a_task_on_the_run_and_settles_through_tasks_get_and_update() -> None:
    asked: list[types.ElicitRequestParams] = []

    async def record(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return ACCEPT

    async with connect(elicitation_callback=record, extensions=[TasksExtension()]) as client:
        created = await client.session.call_tool("conformance-approval", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult), created
        # The task id is the projected run id with an unguessable opaque segment (§5.11).
        run_id = unproject(created.task_id)
        assert (await get_run(run_id))["workflowId"] == "conformance-approval"
        assert created.status in ("working", "input_required")
        assert created.ttl_ms is None or created.ttl_ms > 0

        final = await settle(client.session, created)

    assert final["status"] == "completed", final
    assert final["result"]["isError"] is False, final
    assert final["result"]["resultType"] == "complete", "the inlined result is a complete CallToolResult"
    assert len(asked) == 1, "the elicitation callback answered the task's one input request"
    assert (await get_run(run_id))["status"] == "completed"
    assert len([e for e in await events(run_id) if e["type"] == "interrupt.resolved"]) == 1


async def test_call_tool_resolves_a_task_transparently_through_the_extension_claim() -> None:
    async with connect(elicitation_callback=accept, extensions=[TasksExtension()]) as client:
        result = await client.call_tool("conformance-approval", {})
    assert isinstance(result, types.CallToolResult)
    assert result.is_error is False, result.model_dump(by_alias=True)
    run_id = result.structured_content["runId"]
    assert (await get_run(run_id))["status"] == "completed"


async def test_failing_workflow_as_a_task_is_completed_with_is_error_not_failed() -> None:
    async with connect(extensions=[TasksExtension()]) as client:
        # failing_job fails after about a second: conformance-failure fails at once, within the
        # sidecar's immediate-result window, and would be answered without a task.
        created = await client.session.call_tool("failing_job", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        final = await settle(client.session, created)
    # ext-tasks §5.4: `failed` is only for JSON-RPC errors; a business failure is a completed
    # task whose result has isError true.
    assert final["status"] == "completed", final
    assert final["result"]["isError"] is True, final
    assert (await get_run(unproject(created.task_id)))["status"] == "failed"


async def test_tasks_cancel_cancels_the_run_upstream_and_a_second_cancel_changes_nothing() -> None:
    async with connect(extensions=[TasksExtension()]) as client:
        created = await client.session.call_tool("conformance-approval", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        run_id = unproject(created.task_id)
        try:
            await task_until(client.session, created.task_id, "input_required")
            await cancel_task(client.session, created.task_id)

            run = await wait_run_status(run_id, TERMINAL, timeout_s=10)
            assert run["status"] == "cancelled", run
            assert (await get_task(client.session, created.task_id))["status"] == "cancelled"

            before = len(await events(run_id))
            await cancel_task(client.session, created.task_id)
            assert len(await events(run_id)) == before, "cancelling a cancelled task appended events"
            assert (await get_run(run_id))["status"] == "cancelled"
        finally:
            await cancel_run_quietly(run_id)


async def test_a_second_client_resumes_a_detached_task_by_id() -> None:
    async with connect(extensions=[TasksExtension()]) as first:
        created = await first.session.call_tool("conformance-approval", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
    # The first client is closed; the task (the run) lives on and is found by id alone.
    run_id = unproject(created.task_id)
    try:
        async with connect(extensions=[TasksExtension()]) as second:
            pending = await task_until(second.session, created.task_id, "input_required")
            keys = list(pending["inputRequests"])
            suspended = [e["payload"]["interruptId"] for e in await events(run_id) if e["type"] == "node.suspended"]
            assert keys == suspended, "the input request is keyed by the open interruptId"
            assert pending["inputRequests"][keys[0]]["method"] == "elicitation/create"
            assert "requestState" not in pending, "tasks carry no requestState"

            await update_task(second.session, created.task_id, {keys[0]: {"action": "accept", "content": {"action": "accept"}}})
            done = await task_until(second.session, created.task_id, "completed")
        assert done["result"]["isError"] is False, done
        assert (await get_run(run_id))["status"] == "completed"
    finally:
        await cancel_run_quietly(run_id)


async def test_a_settle_timeout_names_the_task_and_another_client_settles_it_by_id() -> None:
    async with connect(extensions=[TasksExtension()]) as first:
        created = await first.session.call_tool("conformance-delay", {"delayMs": 4000}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        with pytest.raises(TaskWaitTimeout) as caught:
            await settle(first.session, created, timeout=0.5)
    assert caught.value.task_id == created.task_id
    assert isinstance(caught.value, TimeoutError)
    assert caught.value.last_status == "working", caught.value.task
    run_id = unproject(created.task_id)
    try:
        # The first client is closed; the id alone resumes the wait, to completion.
        async with connect(extensions=[TasksExtension()]) as second:
            final = await settle(second.session, caught.value.task_id)
        assert final["status"] == "completed", final
        assert (await get_run(run_id))["status"] == "completed"
    finally:
        await cancel_run_quietly(run_id)


async def test_another_tenant_cannot_read_or_cancel_the_task() -> None:
    async with connect(extensions=[TasksExtension()]) as owner:
        created = await owner.session.call_tool("conformance-approval", {}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
    run_id = unproject(created.task_id)
    try:
        async with connect(key=KEYS["globex"], extensions=[TasksExtension()]) as other:
            for call in (get_task, cancel_task):
                with pytest.raises(MCPError) as caught:
                    await call(other.session, created.task_id)
                # Not-yours is indistinguishable from unknown (§5.10): -32602.
                assert caught.value.error.code == -32602, caught.value
        assert (await get_run(run_id))["status"] not in TERMINAL, "the other tenant's cancel reached the run"
    finally:
        await cancel_run_quietly(run_id)


async def test_unknown_task_id_is_a_32602_error() -> None:
    async with connect(extensions=[TasksExtension()]) as client:
        with pytest.raises(MCPError) as caught:
            await get_task(client.session, "acme~2Fr-ZZZZZZZZZZZZZZZZZZZZZZZZ")
    assert caught.value.error.code == -32602, caught.value


async def test_without_the_extension_calls_block_and_task_methods_are_refused_with_32021() -> None:
    async with connect(extensions=[TasksExtension()]) as tasked:
        # Longer than the immediate-result window (300 ms), so the call gets its task.
        created = await tasked.session.call_tool("conformance-delay", {"delayMs": 2000}, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
    try:
        async with connect() as plain:
            # No extension on the request: never a task (§5.2), the call blocks to its result.
            result = await plain.call_tool("conformance-delay", {"delayMs": 200})
            assert isinstance(result, types.CallToolResult) and result.is_error is False
            with pytest.raises(MCPError) as caught:
                await get_task(plain.session, created.task_id)
        assert caught.value.error.code == -32021, caught.value
    finally:
        await cancel_run_quietly(unproject(created.task_id))
