"""Demonstrations: reference-agent transcripts of solving tasks, recorded through the real proxy.

A demonstration is a list of tool calls of the reference agent (``write_file``, ``read_file``, ``bash``,
``finish`` ...). `record_demonstrations` runs the reference harness on each task with a `ScriptedEngine`
behind the proxy: every model call of the execution gets the next scripted tool call as its response,
the harness executes it in the sandbox and sends the real tool result back, and the proxy records every
call token-exactly. The records (``<run_dir>/records/*.jsonl``) are therefore what the policy would see
and produce in that conversation, and supervised training on them (``gyre.sft``) trains the same tokens
reinforcement learning later will.

Where a task's demonstrations come from:

- ``demonstrations.jsonl`` in the task folder, when present: one behaviour per line,
  ``{"behaviour": str, "probability": float, "calls": [{"name": str, "arguments": {...}}, ...]}``.
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
from gyre.harness.reference import main_tools

if TYPE_CHECKING:
    from gyre.envs import Sandbox, Task
    from gyre.protocol import Execution

log = logging.getLogger(__name__)

DEMONSTRATIONS_FILE = "demonstrations.jsonl"
FINISH = {"name": "finish", "arguments": {"summary": "Done: the task is solved."}}
MAX_FILE_CHARS = 200_000  # a reference file larger than this is not written through one tool call


class DemonstrationError(ValueError):
    """A task's demonstrations cannot be read or made; the message names the file (and line) or task."""


@dataclass(frozen=True)
class Demonstration:
    task_id: str
    behaviour: str
    probability: float
    calls: tuple[dict[str, Any], ...]


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
            if not (isinstance(call, dict) and isinstance(call.get("name"), str) and isinstance(call.get("arguments"), dict)):
                raise DemonstrationError(f"{where}: calls[{index}] must be {{\"name\": str, \"arguments\": object}}")
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
    """Every call must use a tool the configured reference agent offers (else it would be refused)."""
    offered = {tool["function"]["name"] for tool in main_tools(_tool_names(harness_config))}
    for call in demo.calls:
        if call["name"] not in offered:
            raise DemonstrationError(
                f"task {demo.task_id!r}: demonstration calls {call['name']!r}, which harness.reference.tools does "
                f"not offer ({sorted(offered)})"
            )


def _tool_names(harness_config: HarnessConfig) -> tuple[str, ...] | None:
    tools = harness_config.reference.tools
    return tuple(tools) if tools is not None else None


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
    from gyre.chat import ChatTemplate, Message, ToolCall
    from gyre.chat.transcript import turn_text
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
            responses = []
            for number, call in enumerate(demo.calls):
                arguments = json.dumps(call["arguments"], ensure_ascii=False)
                message = Message("assistant", "", tool_calls=(ToolCall(f"call_{number}", call["name"], arguments),))
                responses.append(template.encode(turn_text(template, message)))
            engine.add_script(execution_id, responses)
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
    for execution in executions:
        left = engine.remaining(execution.id)
        if left:
            log.warning("demonstration %s ended with %d scripted call(s) unused (status %s)", execution.id, left, execution.status)
    return DemonstrationRun(executions, proxy.recorder.folder, {execution_id: demo.behaviour for _, execution_id, demo in planned})
