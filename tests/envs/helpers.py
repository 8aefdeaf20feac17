"""Shared helpers of the envs tests (markers, machine facts, a leftover-process finder)."""

from __future__ import annotations

import os

import pytest

from gyre.envs.cgroup import find_pids_parent
from gyre.envs.sandbox import bwrap_problem

BWRAP_PROBLEM = bwrap_problem()
needs_bwrap = pytest.mark.skipif(
    BWRAP_PROBLEM is not None,
    reason=f"bubblewrap unavailable ({BWRAP_PROBLEM}); install it with `apt-get install -y bubblewrap`",
)
HAVE_CGROUP = os.geteuid() == 0 and find_pids_parent() is not None
KINDS = [pytest.param("bwrap", marks=needs_bwrap), "process"]
