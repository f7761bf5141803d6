"""The Tasks extension (``io.modelcontextprotocol/tasks``) for the official Python MCP SDK.

Install with the extra: ``pip install './clients/python[mcp]'`` (``mcp`` >= 2.3, the first
release speaking MCP 2026-07-28). ``mcp`` 2.3 ships no Tasks client, but it has a generic
client-extension API: an extension advertises itself in every request's
``clientCapabilities.extensions`` and *claims* an extra ``tools/call`` result shape by its
``resultType``, with a resolver that finishes it through the SDK session. This module is that
extension for Tasks:

* ``TasksExtension(timeout=None)`` advertises ``{"io.modelcontextprotocol/tasks": {}}`` and claims
  ``resultType: "task"`` (``CreateTaskResult``). ``Client.call_tool`` then polls ``tasks/get``
  until the task is terminal, answers ``input_required`` through the client's own elicitation
  callback plus ``tasks/update``, and returns the inlined ``CallToolResult``.
* ``client.session.call_tool(..., allow_claimed=True)`` returns the ``CreateTaskResult`` itself;
  ``get_task`` / ``update_task`` / ``cancel_task`` / ``settle`` work on a task id, from the
  client that started the task or any other (resume by id).

Waiting has no cap unless the caller sets one; a timeout raises ``TaskWaitTimeout`` carrying the
``task_id`` (the task goes on: ``settle(session, err.task_id)`` resumes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

import anyio
import mcp_types as types
from mcp.client import ClaimContext, ClientExtension, ClientRequestContext, ClientSession, ResultClaim
from mcp.shared.exceptions import MCPError
from pydantic import TypeAdapter

from ._client import DEFAULT_POLL_INTERVAL_S, TASKS_EXTENSION, TERMINAL
from ._errors import TaskCancelled, TaskFailed, TaskWaitTimeout

__all__ = [
    "CreateTaskResult",
    "TasksExtension",
    "answer_input_requests",
    "cancel_task",
    "get_task",
    "settle",
    "update_task",
]

# tasks/get, tasks/update and tasks/cancel answer plain JSON objects, returned as dicts.
_RAW = TypeAdapter(dict[str, Any])
_ELICIT = TypeAdapter(types.ElicitRequest)


class CreateTaskResult(types.Result):
    """``CreateTaskResult`` (ext-tasks "CreateTaskResult"): flat, no nested ``task`` object."""

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
    # ext-tasks "HTTP headers": tasks/* carry the task id as Mcp-Name.
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


async def settle(
    session: ClientSession,
    task: CreateTaskResult | str,
    *,
    timeout: float | None = None,
) -> dict[str, Any]:
    """Polls ``tasks/get`` (at the task's ``pollIntervalMs``) until the task is terminal,
    answering input requests on the way; returns the terminal ``tasks/get`` result.

    ``task`` is the ``CreateTaskResult`` or just a task id (to resume a task another client
    started). ``timeout`` in seconds, None (the default) for as long as the task runs; when it
    passes, ``TaskWaitTimeout`` carries the task id and the last snapshot.
    """
    task_id = task if isinstance(task, str) else task.task_id
    hint = None if isinstance(task, str) else task.poll_interval_ms
    last: dict[str, Any] | None = None

    async def poll() -> dict[str, Any]:
        nonlocal last
        answered: set[str] = set()
        while True:
            last = await get_task(session, task_id)
            status = last["status"]
            if status in TERMINAL:
                return last
            if status == "input_required":
                pending = {k: v for k, v in (last.get("inputRequests") or {}).items() if k not in answered}
                if pending:
                    await answer_input_requests(session, task_id, pending)
                    answered.update(pending)
                    continue
            interval_ms = last.get("pollIntervalMs") or hint
            await anyio.sleep(interval_ms / 1000 if interval_ms else DEFAULT_POLL_INTERVAL_S)

    if timeout is None:
        return await poll()
    try:
        with anyio.fail_after(timeout):
            return await poll()
    except TimeoutError:
        raise TaskWaitTimeout(task_id, timeout, last) from None


class TasksExtension(ClientExtension):
    """Declares the Tasks extension and resolves ``resultType: "task"`` in ``Client.call_tool``.
    ``timeout`` bounds each such wait (seconds; None, the default, waits as long as the task)."""

    identifier = TASKS_EXTENSION

    def __init__(self, *, timeout: float | None = None) -> None:
        super().__init__()
        self.timeout = timeout

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._resolve)]

    async def _resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        task = await settle(ctx.session, created, timeout=self.timeout)
        if task["status"] == "completed":
            return types.CallToolResult.model_validate(task["result"])
        if task["status"] == "failed":
            raise TaskFailed(task)
        raise TaskCancelled(task)
