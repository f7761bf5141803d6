"""pytest wiring: anyio tests (the `mcp` SDK is built on anyio) on asyncio."""

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
