"""The driver loop: observe, ask the scheduling policy, apply its actions, record what happened.

Rollout and training overlap: executions run as harness subprocesses talking to the proxy (served from its
own thread), role switches and training steps run as tasks on this loop, and every loop iteration hands
the policy a fresh ``SchedulerState``. The policy decides; this module only applies.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gyre.harness.execution import is_scorable
from gyre.protocol import Execution
from gyre.scheduler import (
    AbortStale,
    Action,
    Dispatch,
    Role,
    SchedulerState,
    StartTrainStep,
    SwitchCell,
)
from gyre.scheduler.policies import Policy
from gyre.scheduler.rate import ReadyRate
from gyre.single_controller import MembershipError
from gyre.trainer.buffer import ExecutionBuffer, Group, TaskSampler
from gyre.trainer.metrics import logged_train_metrics
from gyre.trainer.timeline import TimelineLog
from gyre.trainer.observe import group_actions, scheduler_state
from gyre.trajectory import pack_trees
from gyre.trajectory.processor import TrajectoryConfig, process_executions

log = logging.getLogger(__name__)


@dataclass
class LoopConfig:
    total_steps: int = 4
    group_size: int = 4  # samples per task (GRPO group)
    max_tokens_per_microbatch: int = 16384
    max_grad_norm: float | None = 1.0
    ppo_epochs: int = 1  # passes over each step's batch, one optimizer step each
    save_every: int = 1  # checkpoint every k steps and after the last (0: never)
    val_every: int = 0  # validate every k steps, before the first and after the last (0: never)
    val_samples: int = 1  # executions per held-out task at each validation
    val_at_start: bool = True  # validate the starting policy before the first step (with val_every)
    timeline_every: int = 1  # plot the cell-role timeline every k steps
    poll_s: float = 0.2  # how often the loop re-observes when nothing happened
    resume: bool = False
    seed: int = 0


def rewards_by_domain(executions: list[Execution]) -> dict[str, list[float]]:
    by_domain: dict[str, list[float]] = defaultdict(list)
    for execution in executions:
        by_domain[execution.domain or "unknown"].append(execution.reward)
    return dict(by_domain)


def model_seconds(execution: Execution) -> float:
    """Seconds an execution spent inside model calls, as the proxy timed them (calls run one at a time)."""
    return float(sum(call.timings.get("proxy_total_s", call.timings.get("total_s", 0.0)) for call in execution.calls))


def tree_shape(executions: list[Execution]) -> dict[str, float]:
    """How the executions' calls branch: ``paths_mean`` (root-to-leaf paths per execution: sub-agents,
    summaries and retries each open one) and ``shared_token_fraction`` (share of the tokens per-path training
    would compute that the prefix-shared trees compute once)."""
    from gyre.trajectory import build_tree

    trees = [build_tree(e.calls, e.id) for e in executions if e.calls]
    if not trees:
        return {}
    path_tokens = sum(tree.path_token_count() for tree in trees)
    return {"paths_mean": float(np.mean([tree.num_paths for tree in trees])),
            "shared_token_fraction": 1.0 - sum(tree.num_tokens for tree in trees) / path_tokens}


@dataclass
class StepIntake:
    """A step's batch as it comes in: it starts on what is ready (``StartTrainStep``) and, when that is less
    than ``count`` executions, takes each group that completes until it has them (``scheduler.stream_from``)."""

    count: int
    waiting: int  # executions still to come
    arrivals: asyncio.Queue = field(default_factory=asyncio.Queue)  # lists of groups, then None
    streamed: int = 0  # executions that came in after the step started

    def arrive(self, groups: list[Group]) -> None:
        executions = sum(len(group.finished) for group in groups)
        self.waiting -= executions
        self.streamed += executions
        self.arrivals.put_nowait(groups)
        if self.waiting <= 0:
            self.arrivals.put_nowait(None)


class Driver:
    def __init__(self, loop_cfg: LoopConfig, trajectory_cfg: TrajectoryConfig, policy: Policy, cluster: Any,
                 pool: Any, tasks: list[Any], tracker: Any, run_dir: Path, val_tasks: list[Any] | None = None,
                 progress: Any | None = None):
        self.cfg = loop_cfg
        self.trajectory_cfg = trajectory_cfg
        self.policy = policy
        self.cluster = cluster
        self.pool = pool
        self.tracker = tracker
        self.run_dir = Path(run_dir)
        self.sampler = TaskSampler(tasks, loop_cfg.seed)
        self.val_tasks = val_tasks or []
        self.buffer = ExecutionBuffer(loop_cfg.group_size, ReadyRate(policy.cfg.batch_size))
        self.progress = progress
        self.steps_done = 0
        self.switching: dict[str, asyncio.Task] = {}
        self.training: asyncio.Task | None = None
        self.intake: StepIntake | None = None  # the running step's batch
        self.running: set[asyncio.Future] = set()
        self.finished_log: list[dict[str, Any]] = []  # per execution, since the last step
        self.lost = 0  # executions whose execution worker died under them (gyre.harness.nodes)
        self.step_started: float | None = None
        self.last_step_end = time.perf_counter()
        self._wake = asyncio.Event()
        self.validations: set[asyncio.Future] = set()
        self.val_history: list[dict[str, Any]] = []  # every validation's metrics, in step order
        self.idle_seconds: dict[str, float] = defaultdict(float)
        self.role_seconds: dict[str, float] = defaultdict(float)
        self.timeline = TimelineLog(self.run_dir / "timeline.jsonl")
        self.curve_rows: list[dict[str, Any]] = []  # every logged step and validation, for curves.png

    # Observation ------------------------------------------------------------------------------------

    def observe(self) -> SchedulerState:
        waiting = self.intake.waiting if self.intake is not None and self.training is not None else 0
        return scheduler_state(self.cluster, self.buffer, self.training is not None, self.steps_done,
                               self.cfg.total_steps, step_waiting=max(0, waiting), batch_size=self.policy.cfg.batch_size)

    # Actions ----------------------------------------------------------------------------------------

    def apply_all(self, actions: list[Action]) -> None:
        """Apply one decision exactly as issued: its role switches as one concurrent bulk, then the rest in order."""
        switches, others = group_actions(actions)
        self._switch({cell: to for cell, to in switches.items() if cell not in self.switching})
        for action in others:
            self.apply(action)

    def apply(self, action: Any) -> None:
        if isinstance(action, Dispatch):
            for _ in range(math.ceil(action.count / self.cfg.group_size)):
                self._dispatch_group()
        elif isinstance(action, SwitchCell):
            if action.cell_id not in self.switching:
                self._switch({action.cell_id: action.to})
        elif isinstance(action, StartTrainStep):
            if self.training is None:
                self._start_step(action)
        elif isinstance(action, AbortStale):
            for group in self.buffer.abort(action.before_version):
                for future in group.handles:
                    future.cancel()  # the harness is stopped and its key closed: its calls are released
        else:
            raise TypeError(f"unknown scheduler action {action!r}")

    def _switch(self, moves: dict[str, Role]) -> None:
        if not moves:
            return
        try:
            switching = self.cluster.switch_many(moves)  # planned now: the cells show their targets
        except MembershipError as error:  # e.g. a cell asked into the role it is in: nothing to do
            log.error("switch %s refused: %s", {c: to.value for c, to in moves.items()}, error)
            return
        task = asyncio.ensure_future(switching)
        for cell_id in moves:
            self.switching[cell_id] = task
        task.add_done_callback(lambda t, cells=tuple(moves): self._switch_done(cells, t))

    def _dispatch_group(self) -> None:
        task = self.sampler.next()
        group = self.buffer.new_group(task, self.cluster.version)
        for index in range(self.cfg.group_size):
            future = asyncio.ensure_future(self.pool.submit(task, group=group.id, sample_index=index))
            self.running.add(future)
            group.handles.append(future)
            future.add_done_callback(lambda f, g=group.id: self._execution_done(g, f))

    def _execution_done(self, group_id: str, future: asyncio.Future) -> None:
        self.running.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            log.error("execution of group %s failed outside the harness: %s", group_id, error)
            self.buffer.finish(group_id, None, scorable=False)  # type: ignore[arg-type]
        else:
            execution: Execution = future.result()
            scorable = is_scorable(execution)
            self.lost += execution.reward_detail.get("note") == "worker_lost"
            self.buffer.finish(group_id, execution, scorable=scorable)
            self.finished_log.append({
                "domain": execution.domain, "reward": execution.reward, "status": execution.status,
                "calls": len(execution.calls), "scorable": scorable,
                "seconds": execution.reward_detail.get("wall_s", float("nan")),
                "model_seconds": model_seconds(execution),
            })
        self._stream_in()
        self._wake.set()

    def _stream_in(self) -> None:
        """Hand a step that waits for the rest of its batch the groups that completed, oldest first."""
        intake = self.intake
        if intake is None or intake.waiting <= 0:
            return
        groups = self.buffer.take(intake.waiting)
        if groups:
            intake.arrive(groups)

    def _switch_done(self, cells: tuple[str, ...], task: asyncio.Task) -> None:
        for cell_id in cells:
            self.switching.pop(cell_id, None)
        if not task.cancelled() and task.exception() is not None:
            log.error("switching cells %s failed: %s", ", ".join(cells), task.exception())
        self._wake.set()

    def _start_step(self, action: StartTrainStep) -> None:
        groups = self.buffer.take(action.count, action.drop_stale)
        if not groups:
            return
        taken = sum(len(group.finished) for group in groups)
        self.intake = StepIntake(action.count, waiting=max(0, action.count - taken))
        self.step_started = time.perf_counter()
        self.training = asyncio.ensure_future(self._train(groups, self.intake))
        self.training.add_done_callback(lambda _: self._wake.set())

    @staticmethod
    def _executions(groups: list[Group]) -> list[Execution]:
        executions = []
        for group in groups:
            for execution in group.finished:
                execution.group = group.id  # advantages compare the members of one dispatched group
                executions.append(execution)
        return executions

    def _packed(self, groups: list[Group], num_executions: int | None = None) -> list:
        trees = process_executions(self._executions(groups), self.trajectory_cfg, num_executions)
        return pack_trees(trees, self.cfg.max_tokens_per_microbatch)

    async def _arrivals(self, intake: StepIntake, arrived: list[Group]) -> Any:
        """Micro-batches of the groups that complete after the step started, as they come (each arrival's
        trees weighted for the whole batch of ``intake.count``)."""
        while (groups := await intake.arrivals.get()) is not None:
            arrived += groups
            batches = self._packed(groups, intake.count)
            if batches:
                yield batches

    async def _train(self, groups: list[Group], intake: StepIntake) -> None:
        version = self.cluster.version
        if intake.waiting <= 0:
            batches = self._packed(groups)
            metrics = logged_train_metrics(await self.cluster.train_step(batches, self.cfg.max_grad_norm,
                                                                              epochs=self.cfg.ppo_epochs))
        else:
            # Started on part of its batch: the rest streams in (``_arrivals`` appends it to ``groups``).
            # Every arrival's loss weights assume the batch's ``count`` executions; the update rescales
            # them to the number actually trained.
            def grad_scale() -> float:
                trained = sum(1 for e in self._executions(groups) if e.calls)
                return intake.count / trained if trained else 1.0

            batches = self._packed(groups, intake.count)
            metrics = logged_train_metrics(await self.cluster.train_step(
                batches, self.cfg.max_grad_norm, more=self._arrivals(intake, groups), grad_scale=grad_scale,
                epochs=self.cfg.ppo_epochs))
        executions = self._executions(groups)
        metrics["executions/streamed_in"] = intake.streamed
        staleness = [version - group.version for group in groups for _ in group.finished]
        metrics.update(self._step_metrics(executions, staleness))
        self.steps_done += 1
        self.last_step_end = time.perf_counter()
        # Checkpoint before logging: a step that was logged is never trained again after a resume. The last
        # step always saves, so a finished run's checkpoints/latest is its final policy.
        last = self.steps_done == self.cfg.total_steps
        if self.cfg.save_every and (self.steps_done % self.cfg.save_every == 0 or last):
            await self.save()
        self.tracker.log(metrics, step=self.steps_done)
        self.curve_rows.append({"step": self.steps_done, **metrics})
        self.intake = None
        self.plot_curves()
        if self.cfg.timeline_every and self.steps_done % self.cfg.timeline_every == 0:
            self.plot_timeline()
        if self.cfg.val_every and self.val_tasks and (self.steps_done % self.cfg.val_every == 0 or last):
            self.validations.add(asyncio.ensure_future(self.validate(self.steps_done)))
        self.training = None

    def _step_metrics(self, executions: list[Execution], staleness: list[int]) -> dict[str, Any]:
        """Rollout, reward, staleness and cell-time metrics of a step (the trainer's own come from
        ``logged_train_metrics``)."""
        metrics: dict[str, Any] = {}
        rewards = np.asarray([e.reward for e in executions])
        metrics["reward/mean"] = float(rewards.mean())
        metrics["pass_rate"] = float((rewards >= 1.0).mean())
        for domain, values in rewards_by_domain(executions).items():
            metrics[f"reward/{domain}"] = float(np.mean(values))
            metrics[f"pass_rate/{domain}"] = float(np.mean(np.asarray(values) >= 1.0))
        statuses = [e.status for e in executions]
        metrics["executions/trained"] = sum(1 for e in executions if e.calls)
        metrics["executions/no_calls"] = sum(1 for e in executions if not e.calls)  # left out (trajectory.processor)
        metrics["executions/timeout"] = statuses.count("timeout")
        metrics["executions/crashed"] = statuses.count("crashed")
        nodes = {e.reward_detail["node_id"] for e in executions if "node_id" in e.reward_detail}
        if nodes:  # cluster.execution_nodes > 0: on how many nodes the step's executions ran
            metrics["executions/nodes"] = len(nodes)
        metrics["executions/partial"] = int(((rewards > 0) & (rewards < 1)).sum())
        metrics["executions/finished_since_last_step"] = len(self.finished_log)
        # Each execution finished since the last step (possibly none: a step can train on executions that
        # finished before the previous one ended): its wall time, split into model-call time and the rest
        # (tools, harness start-up, scoring), and its calls. Same order in every list; the simulator's
        # calibration fits them.
        timed = [f for f in self.finished_log if math.isfinite(f["seconds"])]
        metrics["rollout/execution_time_s"] = [f["seconds"] for f in timed]
        metrics["rollout/model_time_s"] = [f["model_seconds"] for f in timed]
        metrics["rollout/tool_time_s"] = [max(0.0, f["seconds"] - f["model_seconds"]) for f in timed]
        metrics["rollout/execution_calls"] = [f["calls"] for f in timed]
        if timed:
            metrics["rollout/execution_time_mean_s"] = float(np.mean(metrics["rollout/execution_time_s"]))
        metrics["rollout/calls_per_execution"] = [len(e.calls) for e in executions]
        # Wall seconds of each execution this step trained (benchmarks/schedulers.py: work trained per hour,
        # and its length bias against rollout/execution_time_s, every execution that finished)
        metrics["train/execution_time_s"] = [e.reward_detail.get("wall_s", float("nan")) for e in executions]
        metrics["rollout/calls_per_execution_mean"] = float(np.mean([len(e.calls) for e in executions]))
        # How the step's executions branched, before trajectory.max_paths (what was trained: tokens/*)
        metrics.update({f"trees/{key}": value for key, value in tree_shape(executions).items()})
        self.finished_log = []
        metrics["staleness/mean"] = float(np.mean(staleness)) if staleness else 0.0
        metrics["staleness/max"] = int(max(staleness)) if staleness else 0
        metrics["step_time_s"] = time.perf_counter() - self.last_step_end
        metrics["dropped_stale"] = self.buffer.dropped_stale
        metrics["aborted_stale"] = self.buffer.aborted
        metrics["unscorable"] = self.buffer.unscorable
        metrics["executions/lost"] = self.lost
        for cell, roles in self.cluster.seconds_in_roles().items():
            for role, secs in roles.items():
                metrics[f"cells/{cell}/{role}_s"] = secs
        total = sum(self.role_seconds.values())
        if total:
            metrics["idle_fraction"] = sum(self.idle_seconds.values()) / total
            for role in self.role_seconds:
                if self.role_seconds[role]:
                    metrics[f"idle_fraction/{role}"] = self.idle_seconds[role] / self.role_seconds[role]
        switches = self.cluster.switch_log
        for kind in ("rollout_to_train_s", "train_to_rollout_s"):
            values = [s["seconds"] for s in switches if s["kind"] == kind]
            if values:
                metrics[f"switch/{kind}"] = float(np.mean(values))
        metrics["switch/count"] = len(switches)
        metrics["cells"] = len(self.cluster.ids)
        metrics["cells/capacity"] = self.cluster.cfg.capacity
        metrics["group_size"] = self.cfg.group_size
        cfg = self.policy.cfg
        metrics["scheduler"] = {"name": self.policy.name, "batch_size": cfg.batch_size,
                                "max_staleness": cfg.max_staleness, "stale_policy": cfg.stale_policy,
                                "rollout_cells": cfg.rollout_cells}
        return metrics

    async def validate(self, step: int) -> dict[str, Any]:
        """Every held-out task ``val_samples`` times with the current weights (never trained on); logged as
        ``val/*`` at ``step`` and plotted into ``val_curve.png``. ``val/pass_rate`` counts full credit (with
        its 95% Wilson interval ``val/pass_rate_ci``), ``val/score`` is the mean reward (partial credit
        included). ``val/planned`` executions were started and ``val/executions`` scored: a benchmark must
        not read a pass rate whose denominator shrank (`gyre.trainer.intervals.check_complete`)."""
        from gyre.trainer.intervals import wilson

        version = self.cluster.version
        futures = [self.pool.submit(task, group=f"val-{step}", sample_index=index)
                   for task in self.val_tasks for index in range(self.cfg.val_samples)]
        everything = await asyncio.gather(*futures)
        executions = [e for e in everything if is_scorable(e)]
        rewards = np.asarray([e.reward for e in executions], dtype=float)
        passes = int((rewards >= 1.0).sum())
        metrics: dict[str, Any] = {
            "val/pass_rate": float((rewards >= 1.0).mean()) if rewards.size else float("nan"),
            "val/pass_rate_ci": list(wilson(passes, rewards.size)) if rewards.size else [float("nan")] * 2,
            "val/passes": passes,
            "val/score": float(rewards.mean()) if rewards.size else float("nan"),
            "val/rewards": [float(r) for r in rewards],  # per execution, for intervals of differences
            "val/planned": len(futures),
            "val/unscorable": len(everything) - len(executions),
            "val/executions": len(executions),
            "val/step": step,  # the training steps behind the validated weights
            "val/policy_version": version,
            # Weights that served the calls: other than ``version`` only if training moved on meanwhile.
            "val/call_versions": sorted({call.weight_version for e in executions for call in e.calls}),
        }
        for domain, values in rewards_by_domain(executions).items():
            metrics[f"val/pass_rate/{domain}"] = float(np.mean(np.asarray(values) >= 1.0))
            metrics[f"val/score/{domain}"] = float(np.mean(values))
        metrics.update({f"val/{key}": value for key, value in tree_shape(executions).items()})
        self.val_history.append({"step": step, **metrics})
        self.val_history.sort(key=lambda row: row["step"])
        self.tracker.log(metrics, step=max(step, self.steps_done))
        self.curve_rows.append({"step": max(step, self.steps_done), **metrics})
        self.plot_validation()
        self.plot_curves()
        return metrics

    def plot_validation(self) -> Path:
        """Held-out pass rate and score against the training step: ``<run_dir>/val_curve.png`` (and wandb)."""
        from gyre.plots import plot_curves

        steps = [row["step"] for row in self.val_history]
        series = {"pass rate (full credit)": [row["val/pass_rate"] for row in self.val_history],
                  "score (mean reward)": [row["val/score"] for row in self.val_history]}
        path = plot_curves(self.run_dir / "val_curve.png", steps, series, title="held-out validation", ylabel="fraction")
        self.tracker.log_image("val_curve", path, self.steps_done)
        return path

    # Idle accounting --------------------------------------------------------------------------------

    def account(self, seconds: float) -> None:
        """Charge ``seconds`` of each cell's time to its role, and to idle when it had nothing to do."""
        step = self.cluster.step
        busy_trainers = set(step.inflight) if step is not None else set()
        inflight = self.cluster.routing.inflight() if self.cluster.routing is not None else {}
        for view in self.cluster.views():
            role = view.role.value
            self.role_seconds[role] += seconds
            if view.role == Role.TRAIN and view.id not in busy_trainers:
                self.idle_seconds[role] += seconds
            elif view.role == Role.ROLLOUT:
                if inflight.get(view.id) == 0:
                    self.idle_seconds[role] += seconds
            elif view.role in (Role.SWITCHING, Role.IDLE):
                self.idle_seconds[role] += seconds

    # Checkpoints and plots --------------------------------------------------------------------------

    def plot_timeline(self) -> Path:
        """Every cell's roles over the whole run, earlier sessions of a resumed run included:
        ``<run_dir>/timeline.png`` (and wandb), from ``timeline.jsonl``."""
        from gyre.plots import plot_timeline

        self.timeline.record(self.cluster.membership.timeline, seen=True)
        timelines, resumes = self.timeline.load()
        path = plot_timeline(timelines, time.time(), self.run_dir / "timeline.png", resumes=resumes,
                             title=f"cell roles ({self.policy.name}), step {self.steps_done}")
        self.tracker.log_image("timeline", path, self.steps_done)
        return path

    def plot_curves(self) -> Path:
        """Reward, pass rate, loss and step time against the step: ``<run_dir>/curves.png``, redrawn each step."""
        from gyre.plots import plot_run_curves

        return plot_run_curves(self.curve_rows, self.run_dir / "curves.png",
                               title=f"{self.policy.name}, step {self.steps_done}")

    def _earlier_curve_rows(self) -> list[dict[str, Any]]:
        """The rows a resumed run logged before (its metrics.jsonl, when the jsonl backend wrote one)."""
        path = self.run_dir / "metrics.jsonl"
        if not path.is_file():
            return []
        rows = []
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut short by a killed process
            if row.get("step", math.inf) <= self.steps_done:
                rows.append(row)
        return rows

    async def save(self) -> None:
        """An HF folder of the policy + optimizer (the core's), with the driver's position beside it; ``latest``
        moves only once the whole checkpoint is written."""
        from gyre.replica.checkpoint import mark_latest, step_folder

        folder = step_folder(self.run_dir / "checkpoints", self.steps_done)
        await self.cluster.save(str(folder))
        driver = {"steps_done": self.steps_done, "sampler_position": self.sampler.position,
                  "version": self.cluster.version}
        (folder / "driver.json").write_text(json.dumps(driver))
        mark_latest(folder)

    async def resume(self) -> bool:
        from gyre.replica.checkpoint import latest_checkpoint

        folder = latest_checkpoint(self.run_dir / "checkpoints")
        if folder is None:
            return False
        driver = json.loads((folder / "driver.json").read_text())
        await self.cluster.load(str(folder))
        self.steps_done = driver["steps_done"]
        self.sampler.position = driver["sampler_position"]
        log.info("resumed from %s: step %d, policy version %d", folder, self.steps_done, self.cluster.version)
        return True

    # The loop ---------------------------------------------------------------------------------------

    async def run(self) -> int:
        resumed = await self.resume() if self.cfg.resume else False
        self.timeline.start(keep=resumed)
        if resumed:
            self.curve_rows = self._earlier_curve_rows()
        await self.cluster.start_rollout()
        if self.cfg.val_every and self.val_tasks and self.cfg.val_at_start and not resumed:
            await self.validate(0)  # the starting policy, before any training (a clean "before" figure)
        last = time.perf_counter()
        while not (self.steps_done >= self.cfg.total_steps and self.training is None):
            self.apply_all(self.policy.decide(self.observe()))
            if self.progress is not None:
                self.progress(self)
            self.timeline.record(self.cluster.membership.timeline)
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self.cfg.poll_s)
            except TimeoutError:
                pass
            now = time.perf_counter()
            self.account(now - last)
            last = now
            if self.training is not None and self.training.done():
                self.training.result()  # re-raise a failed step
        for future in list(self.running):  # rollouts no step will take
            future.cancel()
        await asyncio.gather(*self.running, *self.switching.values(), return_exceptions=True)
        if self.validations:
            # A requested validation is part of the run; every cell serves it (training cells may have
            # stayed in training past the last step).
            idle = {view.id: Role.ROLLOUT for view in self.cluster.views() if view.role != Role.ROLLOUT}
            if idle:
                await self.cluster.switch_many(idle)
            await asyncio.gather(*self.validations)
        return self.steps_done
