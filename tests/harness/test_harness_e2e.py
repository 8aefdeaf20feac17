"""End to end: the reference harness with the tiny model behind the live proxy, 8 executions at once,
in the real sandbox, scored by the real scorers.

The tiny model's random weights never produce a valid tool call, which is exactly what makes the
reference agent's branching deterministic: a sub-agent first, retries of every turn, invalid-reply
feedback, and a compaction (summary call) as soon as the conversation passes ``context_chars``.
One execution runs with a quarter-second time limit on a workspace holding most of a solution: it must
end ``timeout`` and still be scored on that workspace with partial credit (a whole two-turn run takes
under a second on a quiet machine, so a 1-second limit could let it finish). One runs with ``max_calls=2``.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from gyre.harness import (
    ExecutionPool,
    HarnessConfig,
    ProxyEndpoint,
    is_scorable,
    make_runner,
)
from gyre.protocol import Execution

ROOT = Path(__file__).resolve().parents[2]
BANK_REFERENCE = ROOT / "recipes" / "nl2repo" / "tasks" / "bank" / "reference" / "bank.py"


def write_partial_bank(workspace: Path) -> None:
    """Most of the bank library: the reference with ``transfer`` broken, so some hidden tests pass."""
    shutil.copy(BANK_REFERENCE, workspace / "bank.py")
    with (workspace / "bank.py").open("a") as handle:
        handle.write("\n\ndef transfer(source, target, amount):\n    raise NotImplementedError\n")


def harness_config() -> HarnessConfig:
    return HarnessConfig.from_mapping(
        {
            "max_turns": 2,
            "max_tokens": 16,
            "progress": True,
            "execution": {"grace_s": 2.0, "poll_s": 0.05},
            # context_chars below the size of the system prompt alone (334 chars): the second turn always
            # compacts first, whatever the random replies add.
            "reference": {"max_retries": 1, "sub_max_turns": 1, "context_chars": 300, "tool_timeout_s": 10},
        }
    )


def test_reference_harness_runs_8_executions_concurrently(server, sandbox, builtin_tasks, tmp_path, no_leftover_processes) -> None:
    nl2repo = {task.id: task for task in builtin_tasks["nl2repo"]}
    swe = builtin_tasks["swe"]
    normal = [nl2repo["anagrams"], nl2repo["baseconv"], nl2repo["bits"], swe[0], swe[1], swe[2]]
    runner = make_runner(harness_config(), sandbox=sandbox, run_dir=tmp_path, endpoint=ProxyEndpoint(server))

    async def main() -> tuple[list[Execution], Execution, Execution, float]:
        async with ExecutionPool(runner, concurrency=8, score_concurrency=2) as pool:
            start = time.monotonic()
            futures = [pool.submit(task, sample_index=i) for i, task in enumerate(normal)]
            timed_out = pool.submit(nl2repo["bank"], time_limit_s=0.25, prepare=write_partial_bank)
            capped = pool.submit(swe[3], max_calls=2)
            results = await asyncio.gather(*futures)
            return list(results), await timed_out, await capped, time.monotonic() - start

    executions, timed_out, capped, wall = asyncio.run(main())
    everything = executions + [timed_out, capped]

    # Every execution is scored on its preserved workspace; each has its own records.
    for execution in everything:
        detail = execution.reward_detail
        assert is_scorable(execution), (execution.id, detail)
        assert detail["eval_attempts"] == 1 and detail["total"] > 0, detail
        assert Path(execution.workspace).is_dir()
        assert all(call.execution_id == execution.id for call in execution.calls)
        assert 0.0 <= execution.reward <= 1.0
    assert len({e.id for e in everything}) == 8

    # They ran concurrently: the batch took far less than the executions' own times added up.
    assert wall < 0.6 * sum(e.reward_detail["wall_s"] for e in everything), wall

    # The normal ones ran to their turn limit, with main, sub-agent and summary calls recorded.
    for execution in executions:
        assert execution.status == "finished", execution.reward_detail
        assert execution.reward_detail["returncode"] == 10  # the reference agent's "turn limit reached"
        agents = Counter(call.agent for call in execution.calls)
        assert agents["main"] >= 2 and agents["sub"] >= 1 and agents["main-summary"] >= 1, agents
        summary = next(call for call in execution.calls if call.agent == "main-summary")
        main_calls = [call for call in execution.calls if call.agent == "main"]
        # A retry re-sends the same conversation: two main calls share one prompt (sibling branches).
        assert len({tuple(call.prompt_ids) for call in main_calls}) < len(main_calls)
        # The summary call extends the conversation it condenses (prefix-shared in the trajectory tree).
        assert summary.meta["parent_call_id"] is not None
        assert execution.reward_detail["fraction"] < 1.0  # gibberish solves nothing
        log_text = Path(execution.reward_detail["log"]).read_text()
        assert '"compactions": 1' in log_text and '"sub_agents": 1' in log_text, log_text[-500:]

    # The quarter-second execution timed out and was scored on its pre-written workspace: partial credit.
    detail = timed_out.reward_detail
    assert timed_out.status == "timeout" and detail["stop_reason"] == "time_limit", detail
    assert 0 < detail["passed"] < detail["total"], detail
    assert 0.0 < timed_out.reward < 1.0  # NL2Repo's reward is the fraction of tests passed

    # max_calls=2: stopped once two calls were recorded (the key is revoked at once; a call already
    # admitted may still land).
    detail = capped.reward_detail
    assert capped.status == "timeout" and detail["stop_reason"] == "max_calls", detail
    assert 2 <= len(capped.calls) <= 4, len(capped.calls)


@pytest.mark.slow
def test_mini_swe_agent_runs_against_the_proxy(server, sandbox, builtin_tasks, tmp_path, no_leftover_processes) -> None:
    """The PyPI mini-swe-agent through litellm, in the sandbox, against the live proxy (tiny model)."""
    pytest.importorskip("minisweagent", reason="pip install mini-swe-agent")
    config = HarnessConfig.from_mapping({"name": "mini-swe-agent", "max_turns": 1, "max_tokens": 16, "progress": False})
    runner = make_runner(config, sandbox=sandbox, run_dir=tmp_path, endpoint=ProxyEndpoint(server))
    task = builtin_tasks["nl2repo"][0]

    async def main() -> Execution:
        async with ExecutionPool(runner, concurrency=1, progress=False) as pool:
            return await pool.submit(task)

    execution = asyncio.run(main())
    log_tail = Path(execution.reward_detail["log"]).read_text()[-2000:]
    assert execution.status == "finished", log_tail  # step limit reached: a normal end (exit 0)
    assert execution.calls and all(call.meta["api"] == "openai.chat" for call in execution.calls), log_tail
    assert is_scorable(execution) and execution.reward_detail["total"] > 0


CLI_HARNESSES = {
    # A short system prompt and one tool keep Claude Code's CPU prefill short (see tests/proxy/test_harnesses.py).
    "claude-code": ("claude", {"claude_code": {"extra_args": ["--system-prompt", "You are a coding agent.", "--tools", "Bash"]}}),
    "codex": ("codex", {}),
}


@pytest.mark.slow
@pytest.mark.npm
@pytest.mark.parametrize("name", sorted(CLI_HARNESSES))
def test_node_cli_runs_in_the_sandbox_against_the_proxy(name, server, sandbox, builtin_tasks, tmp_path, no_leftover_processes) -> None:
    """Claude Code and Codex CLI, unmodified, in the sandbox: they reach the proxy at the address they are
    given (through the gate and the forwarder where bwrap isolates the network) and their calls are recorded.
    The tiny model's replies end their runs early (a crash is fine); what counts is the calls."""
    import shutil

    executable, extra = CLI_HARNESSES[name]
    if shutil.which(executable) is None:
        pytest.skip(f"{executable} is not installed (npm install -g @anthropic-ai/claude-code @openai/codex)")
    config = HarnessConfig.from_mapping({"name": name, "max_turns": 2, "max_tokens": 16, "progress": False,
                                         "execution": {"time_limit_s": 120}, **extra})
    runner = make_runner(config, sandbox=sandbox, run_dir=tmp_path, endpoint=ProxyEndpoint(server))

    async def main() -> Execution:
        async with ExecutionPool(runner, concurrency=1, progress=False) as pool:
            return await pool.submit(builtin_tasks["nl2repo"][0])

    execution = asyncio.run(main())
    detail = execution.reward_detail
    log_tail = Path(detail["log"]).read_text()[-2000:]
    assert detail["stop_reason"] == "exited", (detail, log_tail)
    assert execution.calls and all(call.execution_id == execution.id for call in execution.calls), log_tail
    if sandbox.isolates_network():
        assert detail["gate"]["relayed"] >= len(execution.calls), detail["gate"]
