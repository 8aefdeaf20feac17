"""Resource exhaustion by an agent ends its execution with a named stop_reason and leaves nothing running.

Each attack runs as a model-using harness's command (the real path: gate, forwarder, sandbox) with small
limits, and each is bounded so that a broken limit fails the test instead of taking the machine down.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import pytest

from gyre.envs.proctree import processes_with
from gyre.harness import ExecutionPool, HarnessConfig, ProxyEndpoint
from gyre.harness.execution import ExecutionRunner
from gyre.harness.harnesses import Command, LaunchContext


@dataclass
class AttackHarness:
    """A model-using harness whose command is an attack script."""

    script: str
    name: str = "attack"
    uses_model: bool = True

    def command(self, ctx: LaunchContext) -> Command:
        return Command(["bash", "-c", self.script])

    def status(self, returncode: int) -> str:
        return "finished" if returncode == 0 else "crashed"


def attack(server, sandbox, task, tmp_path, script: str, *, time_limit_s: float = 30, **execution):
    config = HarnessConfig.from_mapping({"progress": False, "execution": {"grace_s": 1.0, "poll_s": 0.05, "time_limit_s": time_limit_s, **execution}})
    runner = ExecutionRunner(AttackHarness(script), sandbox, config, ProxyEndpoint(server))
    runner.config.run_dir = str(tmp_path / "runs")

    async def main():
        async with ExecutionPool(runner, concurrency=1, progress=False) as pool:
            return await pool.submit(task)

    return asyncio.run(main())


@pytest.fixture
def marker() -> str:
    return f"GYRE_ATTACK_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def task(builtin_tasks):
    return next(task for task in builtin_tasks["nl2repo"] if task.id == "bank")


def test_fork_bomb(server, sandbox, task, tmp_path, marker, no_leftover_processes) -> None:
    script = ("python -c 'import os, time\nfor _ in range(300):\n    if os.fork() == 0:\n        time.sleep(60); os._exit(0)\n"
              f"time.sleep(60)' {marker}")
    execution = attack(server, sandbox.replace(max_processes=40), task, tmp_path, script)
    assert execution.status == "timeout" and execution.reward_detail["stop_reason"] == "max_processes", execution.reward_detail
    assert execution.reward_detail["harness_s"] < 20
    assert processes_with(marker) == []


def test_memory_bomb_across_processes(server, sandbox, task, tmp_path, marker, no_leftover_processes) -> None:
    """Four processes of 150 MiB each: every one is within its own address-space limit, the total is not."""
    script = ("for i in 1 2 3 4; do python -c 'import time\nx = bytearray(150 * 2**20)\nx[::4096] = b\"x\" * len(x[::4096])\n"
              f"time.sleep(60)' {marker} & done; wait")
    execution = attack(server, sandbox.replace(total_memory_mb=300), task, tmp_path, script)
    assert execution.reward_detail["stop_reason"] == "memory", execution.reward_detail
    assert execution.reward_detail["harness_s"] < 20
    assert processes_with(marker) == []


def test_disk_fill_of_the_workspace(server, sandbox, task, tmp_path, marker, no_leftover_processes) -> None:
    """Many files, each small (a single big one would meet RLIMIT_FSIZE first): the disk walk stops it."""
    script = ("python -c 'import os, time\nfor i in range(400):\n    open(f\"fill_{i}.bin\", \"wb\").write(os.urandom(2**20))\n"
              f"time.sleep(60)' {marker}")
    execution = attack(server, sandbox.replace(disk_mb=50), task, tmp_path, script)
    assert execution.reward_detail["stop_reason"] == "disk", execution.reward_detail
    assert execution.reward_detail["harness_s"] < 20
    assert processes_with(marker) == []


def test_one_file_larger_than_the_disk_limit(server, sandbox, task, tmp_path, no_leftover_processes) -> None:
    script = "head -c 100000000 /dev/zero > big.bin; echo written $?; sleep 60"
    execution = attack(server, sandbox.replace(disk_mb=20), task, tmp_path, script)
    assert execution.reward_detail["stop_reason"] == "disk", execution.reward_detail
    workspace_file = tmp_path / "runs" / execution.id / "workspace" / "big.bin"
    assert workspace_file.stat().st_size <= 20 * 2**20  # RLIMIT_FSIZE stopped the write at the limit


def test_output_flood(server, sandbox, task, tmp_path, marker, no_leftover_processes) -> None:
    execution = attack(server, sandbox, task, tmp_path, f"yes {marker}", output_limit_mb=2)
    detail = execution.reward_detail
    assert detail["stop_reason"] == "output_limit" and detail["killed"], detail
    assert detail["harness_s"] < 20
    assert processes_with(marker) == []


def test_double_fork_and_sigterm_ignoring_leftovers(server, sandbox, task, tmp_path, marker, no_leftover_processes) -> None:
    """The harness exits leaving a double-forked daemon, a setsid job and a SIGTERM-ignoring process."""
    assert processes_with(marker) == []
    sleep = f"python -c 'import time; time.sleep(300)' {marker}"
    script = (f"(setsid {sleep} &); (nohup {sleep} > /dev/null 2>&1 &); "
              f"(trap '' TERM; exec {sleep}) & sleep 0.5; echo left them running")
    execution = attack(server, sandbox, task, tmp_path, script)
    assert execution.status == "finished" and execution.reward_detail["stop_reason"] == "exited", execution.reward_detail
    assert processes_with(marker) == []


def test_sigterm_ignoring_harness_at_the_time_limit(server, sandbox, task, tmp_path, marker, no_leftover_processes) -> None:
    script = f"trap '' TERM; python -c 'import time; time.sleep(300)' {marker} & trap '' TERM; wait"
    execution = attack(server, sandbox, task, tmp_path, script, time_limit_s=1.0)
    detail = execution.reward_detail
    assert detail["stop_reason"] == "time_limit" and detail["killed"], detail
    assert processes_with(marker) == []
