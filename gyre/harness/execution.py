"""One execution, start to score: workspace, key, sandboxed harness process, limits, stop, score.

Steps (`ExecutionRunner.run`):

1. materialise the task's workspace in ``<run_dir>/<execution id>/workspace`` (and apply an optional
   ``prepare`` hook: resuming from saved work, or seeding a partial solution in tests);
2. mint an API key on the proxy (harnesses that use a model), and open the execution's gate
   (`gyre.harness.gate`): a Unix socket that lets through only the proxy's API routes with that key;
3. start the harness in the sandbox (own session and process group, own network namespace: the gate's
   socket, forwarded onto the sandbox's loopback at the proxy's address, is all it can reach), with
   ``HOME`` and generated configs in ``<execution>/control``, its output in ``<execution>/harness.log``;
4. stop it (SIGTERM, then SIGKILL after ``grace_s``) past the time limit or once ``max_calls`` calls are
   recorded (the key is closed first, so no further call gets through); resource exhaustion (processes,
   memory, disk, an output flood) kills it at once;
5. close the key and collect every recorded call;
6. score the preserved workspace, whatever the status: hidden tests are installed only now.

Status: ``finished`` (the harness ended normally), ``timeout`` (a limit stopped it; the detail's
``stop_reason`` says which: ``time_limit``, ``max_calls``, ``output_limit``, ``max_processes``, ``memory``,
``disk``) or ``crashed`` (it failed, or could not start).

A model-using harness needs a sandbox that isolates it: the runner refuses the process kind unless
``env.sandbox.allow_unisolated`` (`Sandbox.unisolated_refusal`). The reward detail
carries ``unscorable``: True when the evaluation failed on every retry, or the workspace could not even
be made; such executions are left out of training (see `is_scorable`). Other keys: ``passed``,
``total``, ``fraction`` (partial credit), ``tests`` (the scorer's detail), ``stop_reason``,
``returncode``, ``num_calls``, ``wall_s``, ``log`` (the harness output).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyre.envs import Mount, SandboxError
from gyre.envs.sandbox import Forward
from gyre.harness.config import ExecutionConfig, HarnessConfig
from gyre.harness.endpoint import ModelEndpoint
from gyre.harness.gate import Gate, GateServer, upstream_of
from gyre.harness.harnesses import Harness, InlineHarness, LaunchContext, ProcessHarness
from gyre.harness.process import ProcessOutcome, run_process
from gyre.harness.scoring import ScoreOutcome, score_workspace
from gyre.protocol import CallRecord, Execution

if TYPE_CHECKING:
    from gyre.envs import Sandbox, Task

log = logging.getLogger(__name__)

CONTROL_TARGET = "/gyre"  # where the control folder appears inside a bwrap sandbox


@dataclass
class ExecutionRequest:
    """What to run: a task, its group (samples of one task share a group; default: the task id), and
    per-execution overrides."""

    task: Task
    group: str | None = None
    sample_index: int = 0
    execution_id: str | None = None
    time_limit_s: float | None = None  # overrides ExecutionConfig.time_limit_s and the task's own
    max_calls: int | None = None  # overrides ExecutionConfig.max_calls
    prepare: Callable[[Path], None] | None = None  # called on the fresh workspace before the harness starts


def new_execution_id(task_id: str, sample_index: int) -> str:
    """Readable and unique (the proxy appends records to a file named by the id, so ids never repeat)."""
    slug = re.sub(r"[^A-Za-z0-9_.@+=-]+", "-", task_id).strip("-.")[:120] or "task"
    return f"{slug}-s{sample_index}-{secrets.token_hex(4)}"


def is_scorable(execution: Execution) -> bool:
    """False when the evaluation itself failed (or there was no workspace to evaluate because the task
    could not be set up): the reward is unknown and the execution must not be trained on."""
    return not execution.reward_detail.get("unscorable", False)


class ExecutionRunner:
    """Runs executions of one harness against one endpoint; shared by all executions of a pool."""

    def __init__(
        self,
        harness: Harness,
        sandbox: Sandbox,
        harness_config: HarnessConfig,
        endpoint: ModelEndpoint | None = None,
    ) -> None:
        if harness.uses_model and endpoint is None:
            raise ValueError(f"harness {harness.name!r} talks to a model: give the runner an endpoint (the proxy)")
        if harness.uses_model:
            refusal = sandbox.unisolated_refusal()
            if refusal is not None:
                raise SandboxError(f"harness {harness.name!r}: {refusal}")
        self.harness = harness
        self.sandbox = sandbox
        self.harness_config = harness_config
        self.config: ExecutionConfig = harness_config.execution
        self.endpoint = endpoint
        self._gates: GateServer | None = None
        if harness.uses_model and endpoint is not None:
            self.upstream = upstream_of(endpoint.openai_base_url)
            if upstream_of(endpoint.anthropic_base_url) != self.upstream:
                raise ValueError("the endpoint's OpenAI and Anthropic base URLs must name the same host and port")

    def gates(self) -> GateServer:
        """The gates of this runner's executions (one thread, started on first use)."""
        if self._gates is None:
            self._gates = GateServer(*self.upstream, max_body_bytes=getattr(self.endpoint, "max_body_bytes", None))
        return self._gates

    async def run(
        self,
        request: ExecutionRequest,
        *,
        slot: asyncio.Semaphore | None = None,
        score_gate: asyncio.Semaphore | None = None,
        on_start: Callable[[], None] | None = None,
    ) -> Execution:
        """Run one execution to its score. Never raises for a failure of the run itself (that is a
        status); cancelling it stops the harness and closes the key.

        ``slot`` is held from workspace setup to the harness's end, ``score_gate`` while the tests run
        (a pool bounds the two phases separately); ``on_start`` is called once ``slot`` is acquired."""
        task = request.task
        execution_id = request.execution_id or new_execution_id(task.id, request.sample_index)
        folder = Path(self.config.run_dir).absolute() / execution_id
        workspace, control = folder / "workspace", folder / "control"
        time_limit = request.time_limit_s or self.config.time_limit_s or task.agent_timeout
        detail: dict[str, Any] = {"harness": self.harness.name, "time_limit_s": time_limit, "log": str(folder / "harness.log")}
        calls: list[CallRecord] = []

        async with slot or contextlib.nullcontext():
            if on_start is not None:
                on_start()
            started = time.monotonic()
            try:
                control.mkdir(parents=True, exist_ok=False)
                await asyncio.to_thread(task.materialise, workspace)
                if request.prepare is not None:
                    await asyncio.to_thread(request.prepare, workspace)
            except Exception as error:  # noqa: BLE001 - the environment's failure, not the policy's: nothing to train on
                log.error("execution %s: could not set up task %s: %s", execution_id, task.id, error)
                detail.update(unscorable=True, note="setup_failed", error=f"workspace setup: {type(error).__name__}: {error}")
                return self._result(execution_id, request, task, [], "crashed", None, detail, workspace, started)
            if isinstance(self.harness, InlineHarness):
                status = await self._run_inline(task, workspace, detail)
            else:
                max_calls = request.max_calls or self.config.max_calls
                status, calls = await self._run_process(execution_id, task, workspace, control, folder, time_limit, max_calls, detail)

        async with score_gate or contextlib.nullcontext():
            outcome = await self._score(task, workspace)
        if not self.config.keep_workspaces:
            shutil.rmtree(workspace, ignore_errors=True)
        return self._result(execution_id, request, task, calls, status, outcome, detail, workspace, started)

    # ------------------------------------------------------------------ harness phase

    async def _run_inline(self, task: Task, workspace: Path, detail: dict[str, Any]) -> str:
        assert isinstance(self.harness, InlineHarness)
        try:
            await asyncio.to_thread(self.harness.apply, task, workspace, self.sandbox)
        except Exception as error:  # noqa: BLE001 - a reference solution that fails is a crash, still scored
            detail.update(stop_reason="error", error=f"{type(error).__name__}: {error}")
            return "crashed"
        detail["stop_reason"] = "exited"
        return "finished"

    async def _run_process(
        self,
        execution_id: str,
        task: Task,
        workspace: Path,
        control: Path,
        folder: Path,
        time_limit: float,
        max_calls: int | None,
        detail: dict[str, Any],
    ) -> tuple[str, list[CallRecord]]:
        harness = self.harness
        assert isinstance(harness, ProcessHarness)
        endpoint = self.endpoint if harness.uses_model else None
        key = await asyncio.to_thread(endpoint.open, execution_id) if endpoint is not None else ""
        deadline = time.monotonic() + time_limit
        calls: list[CallRecord] = []
        gate: Gate | None = None
        try:
            (control / "home").mkdir()
            (control / "instruction.md").write_text(task.instruction, encoding="utf-8")
            mount = Mount(str(control), CONTROL_TARGET, writable=True)
            inner_control = self.sandbox.visible_path(mount)
            ctx = LaunchContext(
                execution_id=execution_id,
                task=task,
                instruction=task.instruction,
                instruction_file=f"{inner_control}/instruction.md",
                workspace=self.sandbox.inner_workspace(workspace, task.workdir),
                control=inner_control,
                control_host=control,
                openai_base_url=endpoint.openai_base_url if endpoint else "",
                anthropic_base_url=endpoint.anthropic_base_url if endpoint else "",
                api_key=key,
                config=self.harness_config,
            )
            command = harness.command(ctx)
            sandbox = self._harness_sandbox(command.memory_mb, command.ro_paths, time_limit)
            env = {"HOME": f"{inner_control}/home", **command.env}
            forward = None
            if endpoint is not None and sandbox.isolates_network():
                gate = await asyncio.to_thread(self.gates().open, key)
                forward = Forward(gate.socket_path, *self.upstream)
            launch = sandbox.prepare(command.argv, workspace, env=env, mounts=[mount], workdir=task.workdir, forward=forward)

            def should_stop() -> str | None:
                if endpoint is not None and max_calls is not None and endpoint.calls(execution_id) >= max_calls:
                    endpoint.revoke(key)  # no further call gets through while the harness is stopped
                    return "max_calls"
                return None

            outcome: ProcessOutcome = await run_process(
                launch,
                folder / "harness.log",
                deadline=deadline,
                should_stop=should_stop,
                poll_s=self.config.poll_s,
                grace_s=self.config.grace_s,
                log_max_bytes=self.config.log_max_bytes,
                output_limit_bytes=None if self.config.output_limit_mb is None else int(self.config.output_limit_mb * 2**20),
            )
        except Exception as error:  # noqa: BLE001 - could not start (bad config, sandbox failure): a crash, still scored
            log.error("execution %s: harness %s failed to run: %s", execution_id, harness.name, error)
            detail.update(stop_reason="error", error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc(limit=5))
            status = "crashed"
        else:
            detail.update(
                stop_reason=outcome.stop_reason,
                returncode=outcome.returncode,
                killed=outcome.killed,
                harness_s=round(outcome.duration_s, 3),
                log_truncated=outcome.log_truncated,
            )
            status = "timeout" if outcome.stop_reason != "exited" else harness.status(outcome.returncode)
        finally:
            if gate is not None:
                detail["gate"] = {"relayed": gate.stats.relayed, "refused": dict(gate.stats.refused),
                                  "refused_routes": gate.stats.refused_routes,
                                  "connections_over_limit": gate.stats.connections_over_limit,
                                  "connections_displaced": gate.stats.connections_displaced}
                await asyncio.to_thread(gate.close)
            if endpoint is not None:
                calls = await asyncio.to_thread(endpoint.close, key, execution_id)
        return status, calls

    def _harness_sandbox(self, memory_mb: int | None | str, ro_paths: tuple[str, ...], time_limit: float) -> Sandbox:
        """The task sandbox, adjusted for a long-lived harness process."""
        changes: dict[str, Any] = {"ro_paths": tuple(self.sandbox.ro_paths) + tuple(ro_paths)}
        if self.config.harness_memory_mb is not None:
            changes["memory_mb"] = self.config.harness_memory_mb
        elif memory_mb != "keep":
            changes["memory_mb"] = memory_mb
        if self.sandbox.cpu_seconds is not None:  # RLIMIT_CPU is per process: let the harness live its time
            changes["cpu_seconds"] = max(self.sandbox.cpu_seconds, time_limit + self.config.grace_s)
        return self.sandbox.replace(**changes)

    # ------------------------------------------------------------------ scoring and the record

    async def _score(self, task: Task, workspace: Path) -> ScoreOutcome:
        return await asyncio.to_thread(
            score_workspace,
            task,
            workspace,
            self.sandbox,
            retries=self.config.eval_retries,
            hung_tests_score_zero=self.config.hung_tests_score_zero,
        )

    def _result(
        self,
        execution_id: str,
        request: ExecutionRequest,
        task: Task,
        calls: list[CallRecord],
        status: str,
        outcome: ScoreOutcome | None,
        detail: dict[str, Any],
        workspace: Path,
        started: float,
    ) -> Execution:
        reward = 0.0
        if outcome is not None:
            reward = outcome.reward
            detail.update(
                unscorable=not outcome.scorable,
                passed=outcome.passed,
                total=outcome.total,
                fraction=outcome.fraction,
                note=outcome.note,
                eval_attempts=outcome.attempts,
                eval_errors=outcome.errors,
                tests=outcome.detail,
                test_log_tail=outcome.log_tail,
            )
        detail.setdefault("unscorable", False)
        detail.update(num_calls=len(calls), wall_s=round(time.monotonic() - started, 3), sample_index=request.sample_index)
        return Execution(
            id=execution_id,
            task_id=task.id,
            group=request.group or task.id,
            calls=calls,
            status=status,  # type: ignore[arg-type]
            reward=reward,
            reward_detail=detail,
            workspace=str(workspace),
            domain=task.domain,
        )
