"""MRTR (multi round-trip requests, SEP-2322) through the SDK's own driver: the sidecar answers
a blocking call on an approval gate with `input_required`; `Client.call_tool` hands the
elicitation to the client's `elicitation_callback` and retries with `inputResponses` and the
echoed `requestState`."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from support import TERMINAL, WireLog, connect, events, run_id_of, wait_run_status

pytestmark = pytest.mark.anyio


def answering(answer: types.ElicitResult) -> tuple[list[types.ElicitRequestParams], Any]:
    asked: list[types.ElicitRequestParams] = []

    async def callback(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return answer

    return asked, callback


async def test_accepted_elicitation_completes_the_call_and_the_run() -> None:
    asked, callback = answering(types.ElicitResult(action="accept", content={"action": "accept"}))
    wire = WireLog()
    async with connect(elicitation_callback=callback, wire=wire) as client:
        result = await client.call_tool("conformance-approval", {})

    assert len(asked) == 1, f"the callback was asked once: {asked}"
    assert isinstance(asked[0], types.ElicitRequestFormParams), "an approval is a form elicitation"
    assert asked[0].requested_schema["properties"]["action"]["enum"] == ["accept", "reject"]
    assert result.is_error is False, result.model_dump(by_alias=True)
    run_id = run_id_of(result)
    assert (await wait_run_status(run_id, TERMINAL, timeout_s=5))["status"] == "completed"
    evs = await events(run_id)
    assert len([e for e in evs if e["type"] == "interrupt.resolved"]) == 1

    # Two tools/call POSTs: the first got input_required, the retry carried the answer keyed by
    # the interrupt id and the requestState byte for byte (MCP 2026-07-28 MRTR).
    calls = wire.posts("tools/call")
    assert len(calls) == 2, [c.body for c in calls]
    first, retry = (c.body["params"] for c in calls)
    assert "inputResponses" not in first and "requestState" not in first
    interrupt_ids = [e["payload"]["interruptId"] for e in evs if e["type"] == "node.suspended"]
    assert list(retry["inputResponses"]) == interrupt_ids
    assert retry["inputResponses"][interrupt_ids[0]]["action"] == "accept"
    assert isinstance(retry["requestState"], str) and retry["requestState"]
    assert calls[0].body["id"] != calls[1].body["id"], "the retry is a new JSON-RPC request"


async def test_declined_elicitation_ends_the_call_with_is_error_and_a_failed_run() -> None:
    asked, callback = answering(types.ElicitResult(action="decline"))
    async with connect(elicitation_callback=callback) as client:
        result = await client.call_tool("conformance-approval", {})
    assert len(asked) == 1
    assert result.is_error is True, result.model_dump(by_alias=True)
    assert (await wait_run_status(run_id_of(result), TERMINAL, timeout_s=5))["status"] == "failed"


async def test_cancelled_elicitation_cancels_the_run() -> None:
    asked, callback = answering(types.ElicitResult(action="cancel"))
    async with connect(elicitation_callback=callback) as client:
        result = await client.call_tool("conformance-approval", {})
    assert len(asked) == 1
    assert result.is_error is True, result.model_dump(by_alias=True)
    assert (await wait_run_status(run_id_of(result), TERMINAL, timeout_s=5))["status"] == "cancelled"
