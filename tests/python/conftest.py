"""pytest wiring: the tests are anyio tests (the `mcp` SDK is built on anyio) on asyncio."""

import os
import sys

import pytest

# The tests import the suite's helpers (support.py) by module name; the Tasks client
# (openwop_mcp_tasks, clients/python) is installed into the venv by run.sh.
sys.path.insert(0, os.path.dirname(__file__))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
