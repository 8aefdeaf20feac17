"""Synthetic agentic call logs: a long main conversation with retries, sub-agents and context summaries.

Used by the tree-training benchmark and by tests that need realistic branching without running a model.
Token IDs are random; behaviour log-probs are placeholders that callers may overwrite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gyre.protocol import CallRecord, Execution


@dataclass
class WorkloadSpec:
    turns: int = 12  # main-agent calls per execution
    system_tokens: int = 64
    task_tokens: int = 96
    response_tokens: tuple[int, int] = (16, 48)  # uniform range per call
    tool_tokens: tuple[int, int] = (24, 96)  # tool output appended after each response
    retry_prob: float = 0.2  # a call is retried (same prompt, new response)
    subagents: int = 2  # sub-agent conversations per execution, each forked from the main history
    subagent_turns: int = 4
    summary_every: int = 0  # main context is summarised and restarted every k turns (0: never)
    vocab_size: int = 2000
    first_token: int = 16  # keep clear of special tokens


class _Conversation:
    def __init__(self, execution_id: str, agent: str, prompt: list[int], spec: WorkloadSpec, rng, counter):
        self.execution_id, self.agent, self.prompt = execution_id, agent, prompt
        self.spec, self.rng, self.counter = spec, rng, counter

    def tokens(self, bounds: tuple[int, int]) -> list[int]:
        n = int(self.rng.integers(bounds[0], bounds[1] + 1))
        return self.rng.integers(self.spec.first_token, self.spec.vocab_size, size=n).tolist()

    def call(self, agent: str | None = None, prompt: list[int] | None = None) -> CallRecord:
        response = self.tokens(self.spec.response_tokens)
        self.counter[0] += 1
        return CallRecord(
            execution_id=self.execution_id,
            call_id=f"{self.execution_id}-c{self.counter[0]}",
            agent=agent or self.agent,
            prompt_ids=list(prompt if prompt is not None else self.prompt),
            response_ids=response,
            response_logprobs=(-self.rng.exponential(1.0, size=len(response))).tolist(),
            weight_version=0,
        )

    def turn(self) -> list[CallRecord]:
        """One agent turn: maybe a failed attempt that is retried, then the kept call and its tool output."""
        calls = []
        if self.rng.random() < self.spec.retry_prob:
            calls.append(self.call())
        kept = self.call()
        calls.append(kept)
        self.prompt = self.prompt + kept.response_ids + self.tokens(self.spec.tool_tokens)
        return calls


def synthetic_execution(execution_id: str, spec: WorkloadSpec, seed: int, group: str = "g0") -> Execution:
    rng = np.random.default_rng(seed)
    counter = [0]
    system = rng.integers(spec.first_token, spec.vocab_size, size=spec.system_tokens).tolist()
    task = rng.integers(spec.first_token, spec.vocab_size, size=spec.task_tokens).tolist()
    main = _Conversation(execution_id, "main", system + task, spec, rng, counter)
    calls: list[CallRecord] = []
    fork_at = sorted(rng.choice(np.arange(1, max(spec.turns, 2)), size=min(spec.subagents, spec.turns), replace=True))
    for turn in range(spec.turns):
        calls.extend(main.turn())
        while fork_at and fork_at[0] == turn + 1:
            fork_at.pop(0)
            # A sub-agent: its own system prompt, the delegated sub-task taken from the main history.
            sub_system = rng.integers(spec.first_token, spec.vocab_size, size=spec.system_tokens // 2).tolist()
            sub = _Conversation(execution_id, "sub", sub_system + main.prompt[-spec.task_tokens :], spec, rng, counter)
            for _ in range(spec.subagent_turns):
                calls.extend(sub.turn())
        if spec.summary_every and (turn + 1) % spec.summary_every == 0 and turn + 1 < spec.turns:
            instruction = main.tokens((8, 8))
            summary_call = main.call(agent="main-summary", prompt=main.prompt + instruction)
            calls.append(summary_call)
            main.prompt = system + task + summary_call.response_ids
    return Execution(id=execution_id, task_id=f"task-{group}", group=group, calls=calls, reward=float(rng.random()))
