"""Cancellation on streamable HTTP (MCP 2026-07-28 Cancellation §Streamable HTTP): a client that goes away before a blocking
tools/call is answered cancels that request, and the sidecar cancels the run behind it."""

from __future__ import annotations

import anyio
import pytest

from support import TERMINAL, WireLog, cancel_run_quietly, connect, events, fresh_run, list_runs, wait_run_status

pytestmark = pytest.mark.anyio


async def test_closing_the_client_mid_call_cancels_the_run() -> None:
    before = await list_runs("conformance-cancellable")
    answered = anyio.Event()
    wire = WireLog()
    run_id = None
    try:
        async with anyio.create_task_group() as tg:

            async def call() -> None:
                async with connect(wire=wire) as client:
                    # Runs for 20 s unless cancelled; the client is closed long before that.
                    await client.call_tool("conformance-cancellable", {"delayMs": 20000})
                answered.set()

            tg.start_soon(call)
            run_id = await fresh_run("conformance-cancellable", before)
            assert (await wait_run_status(run_id, ("running",), timeout_s=5))["status"] == "running"
            # Leaving the task group's scope cancels the call and closes the SDK client (and its
            # HTTP connection) with the tools/call still unanswered.
            tg.cancel_scope.cancel()
        assert not answered.is_set(), "the 20 s call was answered early"
        # On 2026-07-28 HTTP the disconnect itself is the cancellation: the SDK posts no
        # notifications/cancelled (MCP 2026-07-28 Cancellation §Streamable HTTP), so the sidecar must act on the drop.
        assert not wire.posts("notifications/cancelled"), [s.body for s in wire.sent]

        run = await wait_run_status(run_id, TERMINAL, timeout_s=10)
        assert run["status"] == "cancelled", run
        cancelled = [e for e in await events(run_id) if e["type"] == "run.cancelled"]
        assert cancelled and cancelled[0]["payload"].get("reason") == "mcp-request-cancelled", cancelled
    finally:
        if run_id:
            await cancel_run_quietly(run_id)
