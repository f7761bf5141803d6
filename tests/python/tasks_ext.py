"""A Tasks client (`io.modelcontextprotocol/tasks`, SEP-2663) for the Python `mcp` SDK.

`mcp` 2.3.0 ships no Tasks client, but it has a generic extension surface
(`mcp.client.ClientExtension`, SEP-2133): an extension advertises itself in every request's
`clientCapabilities.extensions`, and *claims* an extra `tools/call` result shape by its wire
`resultType`, with a resolver that finishes it through the SDK session. This module is that
extension for Tasks, built only from SDK parts:

* `TasksExtension` advertises `{"io.modelcontextprotocol/tasks": {}}` and claims
  `resultType: "task"` (`CreateTaskResult`, ext-tasks §CreateTaskResult). `Client.call_tool` then polls
  `tasks/get` until the task is terminal, answers `input_required` input requests through the
  client's own elicitation callback plus `tasks/update`, and returns the inlined
  `CallToolResult` (§5.4-§5.6).
* `client.session.call_tool(..., allow_claimed=True)` returns the `CreateTaskResult` itself, and
  `get_task` / `update_task` / `cancel_task` send the three task methods through
  `ClientSession.send_request`, which stamps `_meta` and the `MCP-Protocol-Version`, `Mcp-Method`
  and `Mcp-Name` (= `taskId`, §1.2) headers like any other request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp.client import ClaimContext, ClientExtension, ClientRequestContext, ClientSession, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

TASKS_EXT = "io.modelcontextprotocol/tasks"
TERMINAL = frozenset({"completed", "failed", "cancelled"})

# tasks/get, tasks/update and tasks/cancel answer plain JSON objects; the tests read them as such.
_RAW = TypeAdapter(dict[str, Any])
_ELICIT = TypeAdapter(types.ElicitRequest)


class CreateTaskResult(types.Result):
    """`CreateTaskResult` (ext-tasks §CreateTaskResult): flat, no nested `task` object."""

    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskIdParams(types.RequestParams):
    task_id: str


class TaskUpdateParams(TaskIdParams):
    input_responses: dict[str, Any]


class _TaskRequest(types.Request[TaskIdParams, str]):
    # ext-tasks §HTTP headers: tasks/* carry the task id as Mcp-Name.
    name_param: ClassVar[str | None] = "taskId"


class _TaskUpdateRequest(types.Request[TaskUpdateParams, str]):
    # Its own class: pydantic serializes `params` by the declared type, which would drop
    # `inputResponses` from a TaskIdParams-typed field.
    name_param: ClassVar[str | None] = "taskId"


async def get_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    return await session.send_request(_TaskRequest(method="tasks/get", params=TaskIdParams(task_id=task_id)), _RAW)


async def update_task(session: ClientSession, task_id: str, input_responses: Mapping[str, Any]) -> dict[str, Any]:
    params = TaskUpdateParams(task_id=task_id, input_responses=dict(input_responses))
    return await session.send_request(_TaskUpdateRequest(method="tasks/update", params=params), _RAW)


async def cancel_task(session: ClientSession, task_id: str) -> dict[str, Any]:
    return await session.send_request(_TaskRequest(method="tasks/cancel", params=TaskIdParams(task_id=task_id)), _RAW)


async def answer_input_requests(session: ClientSession, task_id: str, input_requests: Mapping[str, Any]) -> None:
    """Runs each pending input request through the client's own callbacks, then tasks/update."""
    responses: dict[str, Any] = {}
    for key, raw in input_requests.items():
        request = _ELICIT.validate_python(raw)
        ctx = ClientRequestContext(session=session, request_id=key)
        answer = await session.dispatch_input_request(ctx, request)
        if isinstance(answer, types.ErrorData):
            raise MCPError.from_error_data(answer)
        # ElicitResult values inside inputResponses carry no resultType (MCP 2026-07-28 MRTR).
        dumped = answer.model_dump(by_alias=True, mode="json", exclude_none=True)
        dumped.pop("resultType", None)
        responses[key] = dumped
    await update_task(session, task_id, responses)


class TaskFailed(Exception):
    """A task that ended `failed` (its underlying request hit a JSON-RPC error, §5.4)."""

    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(f"task {task.get('taskId')} failed: {task.get('error')}")
        self.task = task


class TaskCancelled(Exception):
    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(f"task {task.get('taskId')} was cancelled")
        self.task = task


async def settle(session: ClientSession, created: CreateTaskResult, *, timeout_s: float = 20.0) -> dict[str, Any]:
    """Polls tasks/get (at the server's pollIntervalMs) until the task is terminal, answering
    input requests on the way. Returns the terminal tasks/get result."""
    answered: set[str] = set()
    with anyio.fail_after(timeout_s):
        while True:
            task = await get_task(session, created.task_id)
            status = task["status"]
            if status in TERMINAL:
                return task
            if status == "input_required":
                pending = {k: v for k, v in (task.get("inputRequests") or {}).items() if k not in answered}
                if pending:
                    await answer_input_requests(session, created.task_id, pending)
                    answered.update(pending)
                    continue
            interval_ms = task.get("pollIntervalMs") or created.poll_interval_ms or 200
            await anyio.sleep(min(interval_ms, 500) / 1000)


async def _resolve(created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
    task = await settle(ctx.session, created)
    if task["status"] == "completed":
        return types.CallToolResult.model_validate(task["result"])
    if task["status"] == "failed":
        raise TaskFailed(task)
    raise TaskCancelled(task)


class TasksExtension(ClientExtension):
    identifier = TASKS_EXT

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=_resolve)]
