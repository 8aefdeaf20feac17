"""Scheduling policies: pure functions from an observed ``SchedulerState`` to a list of actions.

- ``colocate``: every cell rolls out the step's batch, then every cell trains, then all roll out again with
  the new weights. Synchronous and on-policy; the whole cluster waits for the slowest execution.
- ``async``: a fixed split (``rollout_cells`` satellites roll out, the core and the other satellites train);
  rollout never stops, training consumes ready executions at most ``max_staleness`` versions old.
- ``elastic``: rollout keeps going; when a batch is ready the core switches to training at once; a satellite
  joins training only while the remaining rollout capacity still covers the outstanding work
  (``w <= C_R - C_e``), one cell at a time, and goes back when the outstanding work needs it (``w > C_R``).
  Executions are never interrupted: the router moves their sessions.

Outstanding work ``w`` counts running executions plus those the staleness bound still allows to be
dispatched: the rollout capacity the run needs right now.
"""

from __future__ import annotations

from gyre.scheduler.state import (
    Action,
    CellView,
    Dispatch,
    Role,
    SchedulerConfig,
    SchedulerState,
    StartTrainStep,
    SwitchCell,
)


class Policy:
    name = "base"

    def __init__(self, cfg: SchedulerConfig):
        self.cfg = cfg

    def decide(self, state: SchedulerState) -> list[Action]:
        raise NotImplementedError

    # Shared arithmetic -------------------------------------------------------------------------------

    def stale(self, state: SchedulerState) -> int:
        """Ready executions generated more than ``max_staleness`` versions ago."""
        oldest_allowed = state.policy_version - self.cfg.max_staleness
        return sum(1 for version in state.ready_versions if version < oldest_allowed)

    def trainable(self, state: SchedulerState) -> int:
        return state.ready - (self.stale(state) if self.cfg.stale_policy == "drop" else 0)

    def start_step(self, state: SchedulerState) -> StartTrainStep:
        drop = self.stale(state) if self.cfg.stale_policy == "drop" else 0
        return StartTrainStep(self.cfg.batch_size, drop_stale=drop)

    def dispatch_budget(self, state: SchedulerState) -> int:
        """Executions the staleness bound still allows in flight, minus what is running or ready and still
        trainable. Between steps that is ``max_staleness + 1`` batches; while a step runs, one fewer: the
        step will bump the version before anything dispatched now can be trained, so an execution started
        now is already one version old when it is trained at the earliest."""
        ahead = self.cfg.max_staleness + (0 if state.training else 1)
        limit = ahead * self.cfg.batch_size
        budget = limit - state.running - self.trainable(state)
        if state.executions_left is not None:
            budget = min(budget, state.executions_left)
        return max(0, budget)

    @staticmethod
    def switch_all(cells: list[CellView], to: Role) -> list[Action]:
        return [SwitchCell(cell.id, to) for cell in cells if cell.role not in (to, Role.SWITCHING, Role.DEAD)]


class ColocatePolicy(Policy):
    name = "colocate"

    def decide(self, state: SchedulerState) -> list[Action]:
        if state.done or state.switching or state.training:
            return []
        batch = self.cfg.batch_size
        if state.ready >= batch and state.running == 0:
            switches = self.switch_all(list(state.cells), Role.TRAIN)
            return switches or [StartTrainStep(batch)]
        switches = self.switch_all(list(state.cells), Role.ROLLOUT)
        if switches:
            return switches
        need = batch - state.running - state.ready
        if state.executions_left is not None:
            need = min(need, state.executions_left)
        return [Dispatch(need)] if need > 0 else []


class AsyncPolicy(Policy):
    name = "async"

    def __init__(self, cfg: SchedulerConfig):
        super().__init__(cfg)
        self._rollout: set[str] | None = None

    def rollout_ids(self, state: SchedulerState) -> set[str]:
        satellites = [cell for cell in state.cells if not cell.is_core and cell.role != Role.DEAD]
        count = self.cfg.rollout_cells
        if not 1 <= count <= len(satellites):
            raise ValueError(
                f"scheduler.rollout_cells={count} must be between 1 and the {len(satellites)} satellite cells "
                "(the core always trains under async)"
            )
        return {cell.id for cell in satellites[:count]}

    def decide(self, state: SchedulerState) -> list[Action]:
        if state.done:
            return []
        rollout = self._rollout or self.rollout_ids(state)
        self._rollout = rollout  # the split is fixed for the run
        actions: list[Action] = []
        for cell in state.cells:
            want = Role.ROLLOUT if cell.id in rollout else Role.TRAIN
            if cell.role not in (want, Role.SWITCHING, Role.DEAD):
                actions.append(SwitchCell(cell.id, want))
        serving = sum(cell.capacity for cell in state.cells if cell.id in rollout and cell.role == Role.ROLLOUT)
        count = min(self.dispatch_budget(state), max(0, serving - state.running))
        if count:
            actions.append(Dispatch(count))
        if not state.training and self.trainable(state) >= self.cfg.batch_size and state.core.role == Role.TRAIN:
            actions.append(self.start_step(state))
        return actions


class ElasticPolicy(Policy):
    name = "elastic"

    def decide(self, state: SchedulerState) -> list[Action]:
        if state.done:
            return []
        core = state.core
        satellites = [cell for cell in state.cells if not cell.is_core]
        batch_ready = self.trainable(state) >= self.cfg.batch_size
        actions: list[Action] = []

        if not state.training:
            if batch_ready:
                # The core switches to training the moment a batch is ready.
                if core.role == Role.TRAIN:
                    actions.append(self.start_step(state))
                elif core.role == Role.ROLLOUT:
                    actions.append(SwitchCell(core.id, Role.TRAIN))
            else:
                # Between steps every cell serves rollouts (the core too: its optimizer state is offloaded).
                actions += self.switch_all([core, *satellites] if self.cfg.satellites_return else [core], Role.ROLLOUT)
        elif not state.switching:
            actions += self.rebalance(state, satellites)

        leaving = {a.cell_id for a in actions if isinstance(a, SwitchCell) and a.to == Role.TRAIN}
        planned_rollout = state.capacity_of(Role.ROLLOUT) - sum(c.capacity for c in state.cells if c.id in leaving)
        count = min(self.dispatch_budget(state), max(0, planned_rollout - state.running))
        if count:
            actions.append(Dispatch(count))
        return actions

    def rebalance(self, state: SchedulerState, satellites: list[CellView]) -> list[Action]:
        """During a step, move one satellite at a time by the rule ``w <= C_R - C_e`` / ``w > C_R``."""
        outstanding = state.running + self.dispatch_budget(state)
        rollout_capacity = state.capacity_of(Role.ROLLOUT)
        serving = [cell for cell in satellites if cell.role == Role.ROLLOUT]
        training = [cell for cell in satellites if cell.role == Role.TRAIN]
        if serving and outstanding <= rollout_capacity - serving[-1].capacity:
            return [SwitchCell(serving[-1].id, Role.TRAIN)]
        if training and outstanding > rollout_capacity:
            return [SwitchCell(training[-1].id, Role.ROLLOUT)]
        return []


POLICIES: dict[str, type[Policy]] = {cls.name: cls for cls in (ColocatePolicy, AsyncPolicy, ElasticPolicy)}


def make_policy(cfg: SchedulerConfig) -> Policy:
    if cfg.name not in POLICIES:
        raise ValueError(f"scheduler.name must be one of {sorted(POLICIES)}, got {cfg.name!r}")
    return POLICIES[cfg.name](cfg)
