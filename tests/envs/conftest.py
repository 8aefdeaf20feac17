"""Fixtures for the envs tests: sandboxes of each available kind and unique process markers."""

from __future__ import annotations

import uuid

import pytest

from gyre.envs.sandbox import Sandbox

from .helpers import KINDS


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    """Each sandbox kind this machine can run (bwrap is skipped with a reason where it cannot)."""
    return request.param


@pytest.fixture
def sandbox() -> Sandbox:
    """The sandbox the machine gives by default (bwrap where it works), with test-sized limits."""
    return Sandbox(timeout=60, cpu_seconds=60, memory_mb=2048, max_processes=128)


@pytest.fixture
def marker() -> str:
    """A unique word to put in a command line, to find its processes in /proc afterwards."""
    return f"GYRE_TEST_{uuid.uuid4().hex[:12]}"
