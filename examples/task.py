"""Run a tool as an MCP task to completion with the repository's Python Tasks client
(clients/python, `pip install ./clients/python`), answering the approval it asks for on the way.

    MCP_URL=http://127.0.0.1:8080/mcp MCP_KEY=acme-dev-key python examples/task.py

No time cap unless you set one: `wait(..., timeout=s)` raises TaskWaitTimeout, whose `task_id`
resumes the task later (from this process or another). tests/python/test_examples.py runs this
file against the demo, so the README's snippet cannot drift from what works.
"""

import asyncio
import os

from openwop_mcp_tasks import TasksClient


async def approve(key: str, request: dict) -> dict:
    # Each input request is an MCP request the task waits on; here an elicitation/create.
    print("asked:", request["params"]["message"])
    return {"action": "accept", "content": {"action": "accept"}}


async def main() -> None:
    url = os.environ.get("MCP_URL", "http://127.0.0.1:8080/mcp")
    key = os.environ.get("MCP_KEY", "acme-dev-key")
    async with TasksClient(url, token=key) as tasks:
        started = await tasks.start_tool("conformance-approval", {})
        # The task id is the host's run id (projected); keep it to resume the task later.
        print("task:", started.task_id)
        task = await tasks.wait(started.task_id, on_input=approve)
        print("final:", task["status"], task["result"]["structuredContent"]["status"])


if __name__ == "__main__":
    asyncio.run(main())
