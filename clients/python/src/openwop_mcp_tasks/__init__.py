"""MCP 2026-07-28 Tasks client (``io.modelcontextprotocol/tasks``) for openwop-mcp-sidecar.

``TasksClient`` needs only httpx2: start a tool as a task, read, answer (``tasks/update``) and
cancel it, and wait for it with a timeout of your choosing (none by default) whose error,
``TaskWaitTimeout``, carries the ``task_id`` to resume with. ``openwop_mcp_tasks.mcp_sdk``
(the ``[mcp]`` extra) is the same for the official ``mcp`` SDK's ``Client``.
"""

from ._client import (
    DEFAULT_HTTP_TIMEOUT,
    DEFAULT_POLL_INTERVAL_S,
    PROTOCOL_VERSION,
    TASKS_EXTENSION,
    TERMINAL,
    OnInput,
    TasksClient,
    TaskStart,
)
from ._errors import (
    McpError,
    TaskCancelled,
    TaskFailed,
    TaskInputRequired,
    TasksError,
    TaskWaitTimeout,
    TransportError,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_HTTP_TIMEOUT",
    "DEFAULT_POLL_INTERVAL_S",
    "PROTOCOL_VERSION",
    "TASKS_EXTENSION",
    "TERMINAL",
    "McpError",
    "OnInput",
    "TaskCancelled",
    "TaskFailed",
    "TaskInputRequired",
    "TaskStart",
    "TaskWaitTimeout",
    "TasksClient",
    "TasksError",
    "TransportError",
]
