"""The driver loop: observe, ask the scheduling policy, apply its actions, record what happened.

Rollout and training overlap: executions run as harness subprocesses talking to the proxy (served from its
own thread), role switches and training steps run as tasks on this loop, and every loop iteration hands
the policy a fresh ``SchedulerState``. The policy decides; this module only applies.

What a step records lives beside it: ``step_metrics`` (the logged metrics), ``validation`` (held-out
validation), ``figures`` (curves, validation and timeline plots), ``checkpoints`` (save and resume).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from gyre.trainer.checkpoints import resume, save
from gyre.trainer.cluster import CoreLostError
from gyre.trainer.figures import earlier_curve_rows, plot_curves, plot_timeline
from gyre.trainer.metrics import logged_train_metrics
from gyre.trainer.observe import group_actions, scheduler_state
from gyre.trainer.parking_metrics import ParkingMeter
from gyre.trainer.step_metrics import model_seconds, step_metrics
from gyre.trainer.timeline import TimelineLog
from gyre.trainer.validation import validate
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
                 progress: Any | None = None, faults: Any | None = None):
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
        self.faults = faults  # gyre.trainer.faults.FaultPlan: cells to kill on purpose (cluster.kill_cells)
        self.steps_done = 0
        self.switching: dict[str, asyncio.Task] = {}
        self.training: asyncio.Task | None = None
        self.intake: StepIntake | None = None  # the running step's batch
        self.running: set[asyncio.Future] = set()
        self.finished_log: list[dict[str, Any]] = []  # per execution, since the last step
        self.lost = 0  # executions whose execution worker died under them (gyre.harness.nodes)
        self.parking = ParkingMeter()  # the engines' parking counters, per step (parking/*)
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
        streams = self.intake.waiting > 0  # decided now: the rest may arrive before _train first runs
        self.step_started = time.perf_counter()
        self.training = asyncio.ensure_future(self._train(groups, self.intake, streams))
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

    async def _train(self, groups: list[Group], intake: StepIntake, streams: bool) -> None:
        """One step on ``groups``; ``streams``: it started on part of its batch and takes the rest from
        ``intake`` (whose ``waiting`` may already be 0 here: executions finished between the step's start and
        this task's first turn have arrived in its queue, and are trained)."""
        version = self.cluster.version
        if not streams:
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
        metrics.update(step_metrics(self, executions, staleness))
        engine_stats = getattr(self.cluster, "engine_stats", None)  # a real cluster's (a simulated one has none)
        if engine_stats is not None:
            metrics.update(self.parking.step(await engine_stats()))
        routing = getattr(self.cluster, "routing", None)
        if routing is not None:
            metrics.update(self.parking.routed(routing.occupancy()))
        self.finished_log = []
        self.steps_done += 1
        self.last_step_end = time.perf_counter()
        # Checkpoint before logging: a step that was logged is never trained again after a resume. The last
        # step always saves, so a finished run's checkpoints/latest is its final policy.
        last = self.steps_done == self.cfg.total_steps
        if self.cfg.save_every and (self.steps_done % self.cfg.save_every == 0 or last):
            await save(self)
        self.tracker.log(metrics, step=self.steps_done)
        self.curve_rows.append({"step": self.steps_done, **metrics})
        self.intake = None
        plot_curves(self)
        if self.cfg.timeline_every and self.steps_done % self.cfg.timeline_every == 0:
            plot_timeline(self)
        if self.cfg.val_every and self.val_tasks and (self.steps_done % self.cfg.val_every == 0 or last):
            self.validations.add(asyncio.ensure_future(validate(self, self.steps_done)))
        self.training = None

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

    # The loop ---------------------------------------------------------------------------------------

    async def run(self) -> int:
        resumed = await resume(self) if self.cfg.resume else False
        self.timeline.start(keep=resumed)
        if resumed:
            self.curve_rows = earlier_curve_rows(self)
        await self.cluster.start_rollout()
        if self.cfg.val_every and self.val_tasks and self.cfg.val_at_start and not resumed:
            await validate(self, 0)  # the starting policy, before any training (a clean "before" figure)
        last = time.perf_counter()
        while not (self.steps_done >= self.cfg.total_steps and self.training is None):
            self.apply_all(self.policy.decide(self.observe()))
            if self.faults is not None:
                self.faults.check(self)
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
            if self.cluster.core_lost is not None:  # lost between steps (a step that lost it raised above)
                raise CoreLostError(f"the core cell {self.cluster.core_id} died: {self.cluster.core_lost}")
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
