"""Demonstrations: reference-agent transcripts of solving tasks, recorded through the real proxy.

A demonstration is the list of replies the reference agent's model calls get, in call order: mostly
one tool call each (``write_file``, ``read_file``, ``bash``, ``finish`` ...), and for a branching
execution also several calls in one reply (parallel ``delegate``), a sub-agent's replies and the text of
a context summary. `record_demonstrations` runs the reference harness on each task with a
`ScriptedEngine` behind the proxy: every model call of the execution gets the next scripted reply as its
response, the harness executes it in the sandbox and sends the real tool result back, and the proxy
records every call token-exactly. Each reply names the agent role whose call it answers (``main`` by
default, ``sub``, ``main-summary``); the recorded calls must carry exactly those roles in that order, or
the recording fails naming the execution (a script out of step with the harness would teach garbage). The records (``<run_dir>/records/*.jsonl``) are therefore what the policy would see
and produce in that conversation, and supervised training on them (``gyre.sft``) trains the same tokens
reinforcement learning later will.

Where a task's demonstrations come from:

- ``demonstrations.jsonl`` in the task folder, when present: one behaviour per line,
  ``{"behaviour": str, "probability": float, "calls": [REPLY, ...]}``, a REPLY being one tool call
  ``{"name": str, "arguments": {...}}``, several ``{"tool_calls": [{"name": ..., "arguments": ...}, ...]}``
  or a text ``{"text": str}``, each with an optional ``"agent"`` (``main``, ``sub``, ``main-summary``).
  Several lines describe a demonstrator that acts differently on different runs (the built-in ``learn``
  suite ships an imperfect one); runs draw a line by its probability.
- otherwise the task's reference solution, turned into calls: a reference folder becomes one
  ``write_file`` per file, a patch becomes ``write_file`` of each changed file's new content (``bash rm``
  for a deleted one), a script becomes one ``bash`` call running it; then ``finish``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyre.envs.solutions import CopySolution, PatchSolution, ScriptSolution
from gyre.envs.workspace import patch_paths
from gyre.harness.config import HarnessConfig
from gyre.harness.reference import main_tools, sub_tools

if TYPE_CHECKING:
    from gyre.envs import Sandbox, Task
    from gyre.protocol import Execution

log = logging.getLogger(__name__)

DEMONSTRATIONS_FILE = "demonstrations.jsonl"
FINISH = {"name": "finish", "arguments": {"summary": "Done: the task is solved."}}
MAX_FILE_CHARS = 200_000  # a reference file larger than this is not written through one tool call


class DemonstrationError(ValueError):
    """A task's demonstrations cannot be read or made; the message names the file (and line) or task."""


REPLY_AGENTS = ("main", "sub", "main-summary")  # roles the reference agent calls with (gyre.harness.reference)


@dataclass(frozen=True)
class Demonstration:
    task_id: str
    behaviour: str
    probability: float
    calls: tuple[dict[str, Any], ...]  # replies as written in the file (see the module docstring)

    @property
    def replies(self) -> list[tuple[str, str, list[dict[str, Any]]]]:
        """Each reply as (agent, text, tool calls)."""
        return [reply_parts(call) for call in self.calls]


def reply_parts(reply: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """(agent, text, tool calls) of one scripted reply."""
    if "tool_calls" in reply:
        calls = list(reply["tool_calls"])
    elif "name" in reply:
        calls = [{"name": reply["name"], "arguments": reply["arguments"]}]
    else:
        calls = []
    return str(reply.get("agent", "main")), str(reply.get("text", "")), calls


def _check_reply(reply: Any, where: str) -> None:
    def is_call(call: Any) -> bool:
        return isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), dict)

    if not isinstance(reply, dict):
        raise DemonstrationError(f"{where} must be an object")
    if reply.get("agent", "main") not in REPLY_AGENTS:
        raise DemonstrationError(f"{where}: agent must be one of {REPLY_AGENTS}, got {reply.get('agent')!r}")
    if "tool_calls" in reply:
        if not (isinstance(reply["tool_calls"], list) and reply["tool_calls"] and all(map(is_call, reply["tool_calls"]))):
            raise DemonstrationError(f"{where}: tool_calls must be a non-empty list of {{\"name\": str, \"arguments\": object}}")
    elif "text" in reply:
        if not isinstance(reply["text"], str) or not reply["text"]:
            raise DemonstrationError(f"{where}: text must be a non-empty string")
    elif not is_call(reply):
        raise DemonstrationError(f"{where} must be {{\"name\": str, \"arguments\": object}}, {{\"tool_calls\": [...]}} "
                                 "or {\"text\": str}")


@dataclass
class DemonstrationRun:
    """The executions of a `record_demonstrations` run and where their records are."""

    executions: list[Execution]
    records: Path
    behaviours: dict[str, str] = field(default_factory=dict)  # execution id -> behaviour demonstrated

    @property
    def mean_reward(self) -> float:
        return sum(e.reward for e in self.executions) / max(1, len(self.executions))


def read_demonstrations(path: Path, task_id: str) -> list[Demonstration]:
    """The behaviours of a ``demonstrations.jsonl``; a bad line raises naming the file and line."""
    demos = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise DemonstrationError(f"{where}: not JSON ({error})") from error
        if not isinstance(data, dict) or not isinstance(data.get("calls"), list) or not data["calls"]:
            raise DemonstrationError(f"{where}: expected an object with a non-empty list `calls`")
        probability = data.get("probability", 1.0)
        if not isinstance(probability, (int, float)) or not 0 < probability <= 1:
            raise DemonstrationError(f"{where}: `probability` must be a number in (0, 1], got {probability!r}")
        for index, call in enumerate(data["calls"]):
            _check_reply(call, f"{where}: calls[{index}]")
        demos.append(Demonstration(task_id, str(data.get("behaviour", "expert")), float(probability), tuple(data["calls"])))
    if not demos:
        raise DemonstrationError(f"{path}: holds no demonstration")
    total = sum(demo.probability for demo in demos)
    if abs(total - 1.0) > 1e-3:
        raise DemonstrationError(f"{path}: the probabilities add up to {total:.4f}, not 1")
    return demos


def task_demonstrations(task: Task, sandbox: Sandbox) -> list[Demonstration]:
    """The task's own demonstrations file, else one expert demonstration made from its reference solution."""
    file = Path(task.origin) / DEMONSTRATIONS_FILE if task.origin else None
    if file is not None and file.is_file():
        return read_demonstrations(file, task.id)
    return [Demonstration(task.id, "reference solution", 1.0, (*solution_calls(task, sandbox), FINISH))]


def solution_calls(task: Task, sandbox: Sandbox) -> list[dict[str, Any]]:
    """Tool calls that turn the task's starting workspace into its reference solution."""
    solution = task.solution
    if solution is None:
        raise DemonstrationError(f"task {task.id!r} ({task.origin}) has no reference solution to demonstrate")
    if isinstance(solution, CopySolution):
        root = Path(solution.folder)
        return [_write(task, str(path.relative_to(root)), path) for path in sorted(root.rglob("*")) if path.is_file()]
    if isinstance(solution, PatchSolution):
        return _patch_calls(task, solution, sandbox)
    if isinstance(solution, ScriptSolution):
        if solution.folder is not None:
            raise DemonstrationError(
                f"task {task.id!r}: its solution script needs its folder {solution.folder} (not visible to the agent)"
            )
        return [{"name": "bash", "arguments": {"command": Path(solution.script).read_text(encoding="utf-8")}}]
    raise DemonstrationError(f"task {task.id!r}: no demonstration for a {type(solution).__name__}")


def _write(task: Task, rel: str, path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DemonstrationError(f"task {task.id!r}: reference file {rel} is not text; write_file cannot produce it") from error
    if len(text) > MAX_FILE_CHARS:
        raise DemonstrationError(f"task {task.id!r}: reference file {rel} has {len(text)} characters (limit {MAX_FILE_CHARS})")
    return {"name": "write_file", "arguments": {"path": rel, "content": text}}


def _patch_calls(task: Task, solution: PatchSolution, sandbox: Sandbox) -> list[dict[str, Any]]:
    """Apply the patch to a scratch copy of the starting workspace and write each touched file's result."""
    scratch = Path(tempfile.mkdtemp(prefix="gyre-demo-"))
    try:
        workspace = task.materialise(scratch / "workspace")
        solution.apply(task, workspace, sandbox)
        calls = []
        for rel in patch_paths(solution.patch):
            target = workspace / rel
            if target.is_file():
                calls.append(_write(task, rel, target))
            else:
                calls.append({"name": "bash", "arguments": {"command": f"rm -f -- '{rel}'"}})
        return calls
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def draw(demos: Sequence[Demonstration], count: int, rng: random.Random) -> list[Demonstration]:
    """``count`` behaviours drawn (with replacement) by their probabilities."""
    return rng.choices(list(demos), weights=[demo.probability for demo in demos], k=count)


def check_tools(demo: Demonstration, harness_config: HarnessConfig) -> None:
    """Every call must use a tool the configured reference agent offers its role (else it would be refused);
    a summary reply is text only."""
    options = harness_config.reference
    offered = {
        "main": {tool["function"]["name"] for tool in main_tools(_names(options.tools))},
        "sub": {tool["function"]["name"] for tool in sub_tools(_names(options.sub_tools))},
        "main-summary": set(),
    }
    setting = {"main": "harness.reference.tools", "sub": "harness.reference.sub_tools", "main-summary": "a summary call"}
    for agent, _, calls in demo.replies:
        for call in calls:
            if call["name"] not in offered[agent]:
                raise DemonstrationError(
                    f"task {demo.task_id!r}: demonstration's {agent} reply calls {call['name']!r}, which {setting[agent]} "
                    f"does not offer ({sorted(offered[agent])})"
                )


def _names(tools: list[str] | None) -> tuple[str, ...] | None:
    return tuple(tools) if tools is not None else None


def scripted_response(template: Any, agent: str, text: str, calls: list[dict[str, Any]]) -> list[int]:
    """Token ids of one scripted reply, as the model would generate them (through the end-of-turn token)."""
    from gyre.chat import Message, ToolCall
    from gyre.chat.transcript import turn_text

    tool_calls = tuple(ToolCall(f"call_{number}", call["name"], json.dumps(call["arguments"], ensure_ascii=False))
                       for number, call in enumerate(calls))
    return template.encode(turn_text(template, Message("assistant", text, tool_calls=tool_calls)))


def check_roles(execution: Execution, demo: Demonstration) -> None:
    """The recorded calls must be the script's replies, role for role (a harness out of step with the script,
    e.g. a compaction that came a turn early, records conversations the demonstrator never had)."""
    recorded = [call.agent for call in execution.calls]
    scripted = [agent for agent, _, _ in demo.replies]
    if recorded != scripted:
        raise DemonstrationError(
            f"demonstration {execution.id} ({demo.behaviour!r}, status {execution.status}): the harness made calls as "
            f"{recorded}, the script answers {scripted}; check the task's demonstrations against the harness settings "
            "(tools, context_chars, sub_max_turns, max_turns)"
        )


async def record_demonstrations(
    tasks: Sequence[Task],
    *,
    model_path: str,
    harness_config: HarnessConfig,
    sandbox: Sandbox,
    run_dir: Path,
    samples_per_task: int = 1,
    seed: int = 0,
    eval_retries: int = 2,
) -> DemonstrationRun:
    """Run ``samples_per_task`` demonstrations of every task through the proxy; records go to
    ``<run_dir>/records``. Must be awaited inside a running event loop (the pool's)."""
    from gyre.chat import ChatTemplate
    from gyre.harness.endpoint import ProxyEndpoint
    from gyre.harness.factory import make_runner
    from gyre.harness.pool import ExecutionPool
    from gyre.models import load_tokenizer
    from gyre.proxy.config import ProxyConfig
    from gyre.proxy.server import ProxyServer, build_proxy
    from gyre.rollout.scripted import ScriptedEngine

    if harness_config.name != "reference":
        raise DemonstrationError(f"demonstrations drive the reference agent's tools, not harness {harness_config.name!r}")
    if samples_per_task < 1:
        raise DemonstrationError(f"samples_per_task must be >= 1, got {samples_per_task}")
    rng = random.Random(seed)
    tokenizer = load_tokenizer(model_path)
    template = ChatTemplate(tokenizer)
    engine = ScriptedEngine()
    run_dir = Path(run_dir)
    proxy = build_proxy(tokenizer, [engine], ProxyConfig.from_mapping({"port": 0, "run_dir": str(run_dir), "log_level": "warning"}))
    server = ProxyServer(proxy).start()
    planned: list[tuple[Task, str, Demonstration]] = []
    for task in tasks:
        demos = await asyncio.to_thread(task_demonstrations, task, sandbox)
        for index, demo in enumerate(draw(demos, samples_per_task, rng)):
            check_tools(demo, harness_config)
            execution_id = f"demo-{task.id}-{index}"
            engine.add_script(execution_id, [scripted_response(template, *reply) for reply in demo.replies])
            planned.append((task, execution_id, demo))
    try:
        runner = make_runner(harness_config, sandbox=sandbox, run_dir=run_dir / "executions", eval_retries=eval_retries,
                             endpoint=ProxyEndpoint(server))
        async with ExecutionPool(runner, concurrency=harness_config.concurrency, score_concurrency=harness_config.score_concurrency,
                                 progress=harness_config.progress, label="demonstrations") as pool:
            futures = [pool.submit(task, group=task.id, execution_id=execution_id) for task, execution_id, _ in planned]
            executions = list(await asyncio.gather(*futures))
    finally:
        server.stop()
    demos = {execution_id: demo for _, execution_id, demo in planned}
    for execution in executions:
        left = engine.remaining(execution.id)
        if left:
            log.warning("demonstration %s ended with %d scripted call(s) unused (status %s)", execution.id, left, execution.status)
        if execution.status == "finished":  # a timed-out or crashed one made fewer calls; its record says so
            check_roles(execution, demos[execution.id])
    return DemonstrationRun(executions, proxy.recorder.folder, {execution_id: demo.behaviour for _, execution_id, demo in planned})
