"""examples/task.py, which README.md shows, runs a task to completion against the demo."""

from __future__ import annotations

import os
import subprocess
import sys

from support import MCP_URL

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "task.py")


def test_readme_python_example_runs_a_task_to_completion() -> None:
    out = subprocess.run(
        [sys.executable, EXAMPLE],
        env={**os.environ, "MCP_URL": MCP_URL, "MCP_KEY": "acme-dev-key", "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=45,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # The task id is the projected run id; the approval is asked through the elicitation
    # callback, then the task completes.
    assert lines[0].startswith("task: acme~2Fr-"), out.stdout
    assert any(line.startswith("asked: Conformance approval") for line in lines), out.stdout
    assert lines[-1] == "final: completed completed", out.stdout
