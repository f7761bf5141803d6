"""`openwop-mcp-sidecar stdio` launched by the Python `mcp` SDK 1.x's own `stdio_client`, as a
desktop client launches a local MCP server: the command, its args and the token in its
environment, every option at its default. The process fronts the demo's host directly."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = pytest.mark.anyio

REST_URL = os.environ["REST_URL"].rstrip("/")
# Exported by scripts/lib/demo.sh: the binary and the demo host itself.
SIDECAR_BIN = os.environ.get("SIDECAR_BIN", "")
HOST_URL = os.environ.get("HOST_URL") or REST_URL
KEY = "acme-dev-key"


@asynccontextmanager
async def session(elicit: Any = None):
    """A ClientSession over the SDK's stdio transport, the token in the server's environment."""
    assert SIDECAR_BIN, "SIDECAR_BIN names the built binary (tests/python/run.sh exports it)"
    params = StdioServerParameters(
        command=SIDECAR_BIN,
        args=["stdio", "--upstream", HOST_URL],
        env={"OPENWOP_SIDECAR_TOKEN": KEY, "RUST_LOG": "warn"},
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, elicitation_callback=elicit) as s:
            await s.initialize()
            yield s


async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"action": "accept"})


def rest(path: str) -> Any:
    req = urllib.request.Request(
        f"{REST_URL}{path}",
        headers={"Authorization": f"Bearer {KEY}", "OpenWOP-Version": "2.0", "Accept": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)


def run(run_id: str) -> Any:
    return rest(f"/runs/{quote(run_id, safe='')}")


def run_ids(workflow: str) -> set[str]:
    runs = rest(f"/runs?workflowId={quote(workflow)}&limit=100")
    return {r["runId"] for r in runs.get("runs", runs.get("items", []))}


async def fresh_run(workflow: str, before: set[str]) -> str:
    deadline = time.monotonic() + 5
    while True:
        new = run_ids(workflow) - before
        if new:
            return new.pop()
        assert time.monotonic() < deadline, f"no new {workflow} run"
        await anyio.sleep(0.05)


async def wait_status(run_id: str, want: tuple[str, ...], secs: float = 15) -> str:
    deadline = time.monotonic() + secs
    while True:
        s = run(run_id)["status"]
        if s in want:
            return s
        assert time.monotonic() < deadline, f"run {run_id} stuck in {s}"
        await anyio.sleep(0.05)


def cancel_reason(run_id: str) -> str | None:
    events = rest(f"/runs/{quote(run_id, safe='')}/events/poll?timeout=1").get("events", [])
    return next((e["payload"].get("reason") for e in events if e["type"] == "run.cancelled"), None)


async def test_stdio_lists_tools_and_answers_a_blocking_call() -> None:
    async with session() as s:
        names = {t.name for t in (await s.list_tools()).tools}
        assert {"conformance-approval", "conformance-delay", "confirm_delete"} <= names
        result = await s.call_tool("conformance-delay", {"delayMs": 300})
        assert result.isError is False, result


async def test_stdio_approval_is_asked_through_the_elicitation_callback() -> None:
    async with session(elicit=approve) as s:
        result = await s.call_tool("confirm_delete", {"filename": "py-stdio.txt"})
        assert result.isError is False, result
        assert result.content[0].text == "Deleted py-stdio.txt."


async def test_stdio_task_with_an_approval_completes() -> None:
    async with session(elicit=approve) as s:
        created = await s.experimental.call_tool_as_task("conformance-approval", {})
        task_id = created.task.taskId
        async for status in s.experimental.poll_task(task_id):
            if status.status in ("input_required", "completed"):
                break
        final = await s.experimental.get_task_result(task_id, types.CallToolResult)
        assert final.isError is False, final
        assert (await s.experimental.get_task(task_id)).status == "completed"


async def test_stdio_notifications_cancelled_cancels_the_calls_run() -> None:
    before = run_ids("conformance-cancellable")
    async with session() as s, anyio.create_task_group() as tg:
        # The id the session gives its next request: what the notification names.
        request_id = s._request_id
        tg.start_soon(s.call_tool, "conformance-cancellable", {"delayMs": 20000})
        run_id = await fresh_run("conformance-cancellable", before)
        await wait_status(run_id, ("running",), 5)
        await s.send_notification(
            types.ClientNotification(
                types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=request_id, reason="the user stopped it")
                )
            )
        )
        assert await wait_status(run_id, ("cancelled", "completed")) == "cancelled"
        assert cancel_reason(run_id) == "mcp-request-cancelled"
        tg.cancel_scope.cancel()


async def test_stdio_closing_the_client_cancels_the_call_in_flight() -> None:
    before = run_ids("conformance-cancellable")
    async with session() as s, anyio.create_task_group() as tg:
        tg.start_soon(s.call_tool, "conformance-cancellable", {"delayMs": 20000})
        run_id = await fresh_run("conformance-cancellable", before)
        await wait_status(run_id, ("running",), 5)
        tg.cancel_scope.cancel()
    # stdio_client closed the process's stdin and waited for it to exit: the host accepted the
    # cancel before then, so the run is already cancelling or cancelled (a running run records
    # run.cancelled when its executor stops, a moment after the cancel is answered).
    assert run(run_id)["status"] in ("cancelling", "cancelled")
    assert await wait_status(run_id, ("cancelled",), 10) == "cancelled"
    assert cancel_reason(run_id) == "mcp-request-cancelled"
