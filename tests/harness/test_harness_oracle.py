"""The oracle harness through the ExecutionPool over every built-in task: each scores 1.0.

This is the proof that tasks, sandbox and scorers agree end to end, through the same execution path
(workspace folders, sandbox, scoring after the harness) that training and evaluation use.
"""

from __future__ import annotations

import asyncio

import pytest

from gyre.harness import ExecutionPool, HarnessConfig, make_runner


@pytest.mark.slow
def test_oracle_scores_every_builtin_task(sandbox, builtin_tasks, tmp_path, no_leftover_processes) -> None:
    tasks = [task for domain in sorted(builtin_tasks) for task in builtin_tasks[domain]]
    assert {"swe", "nl2repo"} <= set(builtin_tasks), sorted(builtin_tasks)
    runner = make_runner(HarnessConfig(name="oracle"), sandbox=sandbox, run_dir=tmp_path)

    async def main():
        async with ExecutionPool(runner, concurrency=6, progress=False) as pool:
            return await pool.run(tasks)

    executions = asyncio.run(main())
    assert len(executions) == len(tasks)
    failed = {
        f"{e.domain}:{e.task_id}": (e.status, e.reward, e.reward_detail.get("error"), e.reward_detail.get("eval_errors"))
        for e in executions
        if e.status != "finished" or e.reward != 1.0 or e.reward_detail["unscorable"]
    }
    assert not failed, failed
    assert all(not e.calls for e in executions)  # no model, no proxy
    assert all(e.reward_detail["passed"] == e.reward_detail["total"] > 0 for e in executions)
