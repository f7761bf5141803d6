"""The errors the client raises. Every one that concerns a task carries its ``task_id``, so a
caller that gives up waiting (or loses the connection) can resume the task by id later."""

from __future__ import annotations

from typing import Any


class TasksError(Exception):
    """Base class. ``task_id`` names the task the error concerns, or is None (e.g. a failed
    ``tools/call`` that created no task)."""

    def __init__(self, message: str, *, task_id: str | None = None) -> None:
        super().__init__(message)
        self.task_id = task_id


class McpError(TasksError):
    """The server answered a JSON-RPC error (MCP 2026-07-28 "Error handling"): ``code``,
    ``message`` and ``data`` as sent; ``http_status`` is the HTTP status it came with."""

    def __init__(
        self,
        method: str,
        code: int,
        message: str,
        data: Any = None,
        *,
        http_status: int | None = None,
        task_id: str | None = None,
    ) -> None:
        where = f" (task {task_id})" if task_id else ""
        super().__init__(f"{method}{where}: {code} {message}", task_id=task_id)
        self.method = method
        self.code = code
        self.error_message = message
        self.data = data
        self.http_status = http_status


class TransportError(TasksError):
    """The request got no JSON-RPC answer: a connection failure, an HTTP read timeout, or an
    HTTP error whose body is not a JSON-RPC response. For a task method the task itself is
    unaffected: resume it by ``task_id``."""

    def __init__(
        self,
        method: str,
        detail: str,
        *,
        http_status: int | None = None,
        task_id: str | None = None,
    ) -> None:
        where = f" (task {task_id})" if task_id else ""
        super().__init__(f"{method}{where}: {detail}", task_id=task_id)
        self.method = method
        self.http_status = http_status


class TaskWaitTimeout(TasksError, TimeoutError):
    """The caller's wait timeout passed before the task was terminal. The task goes on on the
    server: ``await client.wait(err.task_id)`` (from this client or any other) resumes it.
    ``task`` is the last ``tasks/get`` snapshot seen, or None."""

    def __init__(self, task_id: str, timeout: float, task: dict[str, Any] | None) -> None:
        status = task.get("status") if task else None
        super().__init__(
            f"task {task_id} was not terminal after {timeout:g} s (last status: {status}); "
            f"it goes on: resume it with wait({task_id!r})",
            task_id=task_id,
        )
        self.timeout = timeout
        self.task = task
        self.last_status = status


class TaskInputRequired(TasksError):
    """The task waits for input and no ``on_input`` callback was given to answer it: answer
    ``input_requests`` with ``update(task_id, {key: response})``, then wait again."""

    def __init__(self, task: dict[str, Any]) -> None:
        task_id = task.get("taskId")
        super().__init__(f"task {task_id} needs input: {sorted(task.get('inputRequests') or {})}", task_id=task_id)
        self.task = task
        self.input_requests: dict[str, Any] = dict(task.get("inputRequests") or {})


class TaskFailed(TasksError):
    """The task ended ``failed``: its request hit a JSON-RPC error (ext-tasks "Task status").
    A tool that reports a business failure ends ``completed`` with ``isError: true`` instead."""

    def __init__(self, task: dict[str, Any]) -> None:
        error = task.get("error") or {}
        super().__init__(f"task {task.get('taskId')} failed: {error.get('code')} {error.get('message')}", task_id=task.get("taskId"))
        self.task = task
        self.error = error


class TaskCancelled(TasksError):
    """The task ended ``cancelled``."""

    def __init__(self, task: dict[str, Any]) -> None:
        super().__init__(f"task {task.get('taskId')} was cancelled", task_id=task.get("taskId"))
        self.task = task
