"""Scheduling policies: from an observed ``SchedulerState`` to a list of actions, with no clock and no I/O.

- ``colocate``: every cell rolls out the step's batch, then every cell trains, then all roll out again with
  the new weights. Synchronous and on-policy; the whole cluster waits for the slowest execution.
- ``async``: a fixed split (``rollout_cells`` satellites roll out, the core and the other satellites train);
  rollout never stops, training consumes ready executions as soon as a batch is there.
- ``elastic``: rollout keeps going; when a batch is ready the core switches to training at once. Satellites
  follow the outstanding work ``w``: every satellite the rule allows moves in one decision, to training
  while the remaining rollout capacity still covers ``w`` (``w <= C_R - C_e`` per cell moved), back to
  rollout when it does not (``w > C_R``). Cells stay where they are across steps while the rule holds, and
  a cell that joined a step is not sent back before its compute ends (hysteresis; in the step's tail, the
  optimizer step and weight sync, satellites have nothing left to do and go back as in the wait). Where
  cells serve fewer sessions at full speed than at full capacity, packing sessions for a joiner is only
  done for a cell that trains at least its join time; cells rollout can spare at full speed join freely.
  Once the rate at which executions become trainable is measured, moves are timed against the wait for the next batch: a cell goes back to
  rollout only if it can return before the batch is ready, and the step's trainers move one join time ahead
  of it. Executions are never interrupted: the router moves their sessions. Details in ``ElasticPolicy``.

State. The policies are not pure functions: two remember a little of their own earlier decisions, which the
observed state does not hold (one policy object serves one run, driver or simulator, deciding in order):

- ``AsyncPolicy._rollout``: the ids of the rollout cells (the first ``rollout_cells`` live satellites at its
  first decision), kept for the run: the split is fixed (chosen again from a later state, it would move
  cells between the pools whenever a satellite died).
- ``ElasticPolicy._moved``: cell id -> (phase, role) of the last move it issued for that cell; hysteresis
  (a cell that joined training in a phase stays until the phase ends) reads it (``_joined_in``).

``ColocatePolicy`` keeps nothing: its decision is a function of the state alone.

Staleness. ``max_staleness`` batches of look-ahead may be in flight beyond the batch being generated.
With ``stale_policy=keep`` (the default) every execution is trained however long it ran, corrected by the
loss's importance weights, so long executions are not selected against. With ``drop`` an execution more
than ``max_staleness`` versions old cannot be trained: ready ones are dropped when a step starts, and
running ones are aborted (``AbortStale``) as soon as no step can take them, freeing their slots; what can
no longer be trained counts neither in the look-ahead budget nor in the outstanding work.

Parking. Where sessions waiting on tools give back their engine slots (``gyre.scheduler.parking``; every
policy gets it alike), a rollout cell serves its slots over the share of time a session holds one
(``SchedulerState.hosted_capacity``): async fills its rollout cells that far, and elastic counts them so when
it decides which satellites rollout can spare, so the cells parking frees during a step train, and go back
as the outstanding work needs them. A cell holding only parked sessions (``CellView.free``) moves nothing
when it leaves: elastic sends free cells first. Colocate is unchanged: parked sessions are still executions
of its batch, which it waits for.

Streaming steps (``stream_from < 1``). Async and elastic start a step once that share of its batch is ready;
the step takes the rest as it completes (its trainers compute what they hold meanwhile), and the executions
it still waits for count as the batch being generated, so the look-ahead stays what ``max_staleness`` says.
The update is the same as the whole batch's (``Driver._train``): only when it is computed changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gyre.scheduler.state import (
    AbortStale,
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

    @property
    def drops(self) -> bool:
        return self.cfg.stale_policy == "drop"

    def stale(self, state: SchedulerState) -> int:
        """Ready executions too stale for a step starting now (``drop`` only; ``keep`` trains them all)."""
        if not self.drops:
            return 0
        return state.ready_below(state.policy_version - self.cfg.max_staleness)

    def trainable(self, state: SchedulerState) -> int:
        return state.ready - self.stale(state)

    def oldest_trainable_running(self, state: SchedulerState) -> int | None:
        """The oldest dispatch version a running execution may have and still be trained, or None (keep).

        The earliest step it can join starts at the current version, or at the next one while a step runs."""
        if not self.drops:
            return None
        return state.policy_version + (1 if state.training else 0) - self.cfg.max_staleness

    def untrainable_running(self, state: SchedulerState) -> int:
        oldest = self.oldest_trainable_running(state)
        return 0 if oldest is None else state.running_below(oldest)

    def running(self, state: SchedulerState) -> int:
        """Running executions that can still be trained."""
        return state.running - self.untrainable_running(state)

    def abort_untrainable(self, state: SchedulerState) -> list[Action]:
        if self.untrainable_running(state) == 0:
            return []
        oldest = self.oldest_trainable_running(state)
        assert oldest is not None
        return [AbortStale(oldest)]

    @property
    def step_start_need(self) -> int:
        """Trainable executions a step starts on: its first ``stream_from`` share (the rest streams in)."""
        return max(1, math.ceil(self.cfg.stream_from * self.cfg.batch_size))

    def batch_ready(self, state: SchedulerState) -> bool:
        """Enough is ready to start a step."""
        return self.trainable(state) >= self.step_start_need

    def start_step(self, state: SchedulerState) -> StartTrainStep:
        return StartTrainStep(self.cfg.batch_size, drop_stale=self.stale(state))

    def dispatch_budget(self, state: SchedulerState) -> int:
        """Executions the look-ahead still allows in flight, minus what is running or ready and still
        trainable. Between steps that is ``max_staleness + 1`` batches; while a step runs, one fewer: the
        step will bump the version before anything dispatched now can be trained, so an execution started
        now is already one version old when it is trained at the earliest."""
        ahead = self.cfg.max_staleness + (0 if state.training else 1)
        limit = ahead * self.cfg.batch_size + state.step_waiting  # a streaming step's batch still coming
        budget = limit - self.running(state) - self.trainable(state)
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
        need = self.dispatch_budget(state)
        return [Dispatch(need)] if need > 0 else []

    def dispatch_budget(self, state: SchedulerState) -> int:
        """What the step's batch still lacks: colocate never dispatches ahead of it."""
        need = self.cfg.batch_size - state.running - state.ready
        if state.executions_left is not None:
            need = min(need, state.executions_left)
        return max(0, need)


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
        actions = self.abort_untrainable(state)
        for cell in state.cells:
            want = Role.ROLLOUT if cell.id in rollout else Role.TRAIN
            if cell.role not in (want, Role.SWITCHING, Role.DEAD):
                actions.append(SwitchCell(cell.id, want))
        serving = sum(state.hosted_capacity(cell) for cell in state.cells if cell.id in rollout and cell.role == Role.ROLLOUT)
        count = min(self.dispatch_budget(state), max(0, serving - self.running(state)))
        if count:
            actions.append(Dispatch(count))
        if not state.training and self.batch_ready(state) and state.core.role == Role.TRAIN:
            actions.append(self.start_step(state))
        return actions


@dataclass
class RolloutPool:
    """Rollout capacity as one decision sees it (executions): serving now, and once the cells switching back
    to rollout have landed; in full-capacity and in full-speed (``SchedulerState.hosted_fast``) units."""

    serving: int = 0
    serving_fast: int = 0
    heading: int = 0
    heading_fast: int = 0
    serving_cells: int = 0
    heading_cells: int = 0  # cells serving or on their way back to rollout
    incoming: bool = False  # cells are on their way back to rollout
    trainers: int = 0  # cells training or on their way to it

    @classmethod
    def of(cls, state: SchedulerState, leaving: str | None) -> RolloutPool:
        pool = cls()
        for cell in state.cells:
            if cell.id == leaving:
                pool.trainers += 1
            elif cell.role == Role.ROLLOUT:
                pool.serving += state.hosted_capacity(cell)
                pool.serving_fast += state.hosted_fast(cell)
                pool.serving_cells += 1
                pool.heading_cells += 1
            elif cell.role == Role.SWITCHING and cell.switching_to == Role.ROLLOUT:
                pool.heading += state.hosted_capacity(cell)
                pool.heading_fast += state.hosted_fast(cell)
                pool.heading_cells += 1
                pool.incoming = True
            elif cell.role in (Role.TRAIN, Role.SWITCHING):
                pool.trainers += 1
        pool.heading += pool.serving
        pool.heading_fast += pool.serving_fast
        return pool


class ElasticPolicy(Policy):
    """Cells go where the work is, moved in bulk, with hysteresis, and ahead of the step they serve.

    Outstanding work ``w`` (executions) is what rollout must hold cells for: the running executions that
    can still be trained, plus the look-ahead still allowed to be dispatched, counted up to one batch
    beyond the next one (deeper look-ahead is dispatched into spare capacity but holds no cell: it would
    only let rollout run further ahead of training). Two phases alternate:

    - Step phase (a batch is ready or a step runs): the core trains. Every satellite that rollout can
      spare joins at once, while the cells left serving still hold ``w`` at full capacity. When the
      observer measures the step's remaining work and the join time (``train_left_s``, ``join_s``), a
      satellite joins only if it will compute at least as long as its switch and weight pull took; where
      cells serve fewer sessions at full speed (``SchedulerState.hosted_fast``) than at full capacity, satellites
      that rollout can spare at full speed join as well, while the step's compute outlasts a join
      (``_step_joiners``). Once the step's compute is done (its tail), satellites act as in the wait.
    - Wait phase (no batch ready, no step): training cells have nothing to do. While the serving cells
      hold more than one session each and the next batch is not near (less than half of it ready), they
      go back to rollout, satellites first: new executions then run faster. While cells are on their
      way back, the serving cells take only their share of the dispatch; the rest waits for the
      returning cells (``_dispatch_now``).

    Timing, once the observer measures how fast executions become trainable (``ready_rate``): the wait
    left is what the batch still lacks over that rate. A cell goes back only while that wait covers its
    round trip (``return_s + join_s``): one that could not be back in training when the batch is ready
    would delay the step by what it gained in rollout. (The half-batch condition above stays: without it
    the grid's ``staleness_2`` scenario loses 5%.) And within one join time of the batch, the core and
    the satellites the step will use (those rollout can spare, each computing at least its join time) move
    to training *before* it is ready, so the step starts with its trainers in place instead of waiting a
    switch and a weight pull for them.

    In either phase, cells in training go back when ``w`` exceeds the rollout capacity (the core only in
    the wait phase). Hysteresis: a cell joins when rollout can spare its whole capacity and goes back only
    when rollout lacks capacity, so cells stay in training across steps while the rule holds; and a cell
    that joined training is not sent back within the same phase (it paid a switch and a weight pull).
    Within a phase ``w`` never grows (the look-ahead allowance only changes when a step starts or ends),
    so the rule itself cannot bounce a cell either.
    """

    name = "elastic"
    SPREAD_BELOW = 0.5  # wait phase: spread sessions only while less than this share of a batch is ready

    def __init__(self, cfg: SchedulerConfig):
        super().__init__(cfg)
        self._moved: dict[str, tuple[int, Role]] = {}  # cell id -> (phase, role) of its last move

    def outstanding(self, state: SchedulerState) -> int:
        """``w``: trainable running executions plus the look-ahead that rollout holds cells for."""
        running = self.running(state)
        one_ahead = (min(self.cfg.max_staleness, 1) + (0 if state.training else 1)) * self.cfg.batch_size
        one_ahead += state.step_waiting
        room = max(0, one_ahead - running - self.trainable(state))
        return running + min(self.dispatch_budget(state), room)

    def phase(self, state: SchedulerState) -> int:
        """Step k's wait for a batch is phase 2k; from its batch being ready to the end of its compute,
        2k + 1; its tail (``in_tail``) already belongs to the next wait, 2k + 2."""
        if self.in_tail(state):
            return 2 * state.steps_done + 2
        return 2 * state.steps_done + (1 if state.training or self.batch_ready(state) else 0)

    @staticmethod
    def in_tail(state: SchedulerState) -> bool:
        """The running step has computed its whole batch: only the core's optimizer step and the weight sync
        are left, so its satellites have nothing more to do in it."""
        return state.training and state.train_left_s == 0 and state.step_waiting == 0

    def wait_left_s(self, state: SchedulerState) -> float | None:
        """Seconds until the next batch is ready at the recent rate (None until the observer measures one)."""
        if not state.ready_rate:
            return None
        return max(0, self.step_start_need - self.trainable(state)) / state.ready_rate

    def decide(self, state: SchedulerState) -> list[Action]:
        if state.done:
            return []
        actions = self.abort_untrainable(state)
        core = state.core
        stepping = state.training or self.batch_ready(state)
        wait_left = None if stepping else self.wait_left_s(state)
        early = wait_left is not None and state.join_s is not None and wait_left <= state.join_s
        # The core switches to training the moment a batch is ready (or one join time before it will be),
        # and the step starts once it is there.
        core_joins = not state.training and (stepping or early) and core.role == Role.ROLLOUT
        if not state.training and stepping and core.role == Role.TRAIN:
            actions.append(self.start_step(state))

        pool = RolloutPool.of(state, core.id if core_joins else None)
        work = self.outstanding(state)
        joining: list[CellView] = []
        returning: list[CellView] = []
        if self.in_tail(state):
            # The satellites' part of the step is done: they go back as in the wait for the next batch
            # (the core stays for the optimizer step), so the next batch's dispatch finds them serving.
            if self._round_trip_fits(state, self.wait_left_s(state)):
                returning = self._spreading(state, pool, work, core_too=False)
        elif stepping and work > pool.heading:
            returning = self._returning(state, work - pool.heading, core_too=False)
        elif stepping:
            joining = self._step_joiners(state, pool, work)
        elif early:
            # The batch is within a join time: the step's trainers move now. Rollout keeps what the running
            # executions need (the look-ahead shrinks to one batch once the step starts).
            joining = self._step_joiners(state, pool, self.running(state), in_place=True)
        elif self._round_trip_fits(state, wait_left):
            returning = self._spreading(state, pool, work, core_too=True)
        actions += self._move(([core] if core_joins else []) + joining, Role.TRAIN, state)
        actions += self._move(returning, Role.ROLLOUT, state)

        count = self._dispatch_now(state, pool, joining, returning)
        if count:
            actions.append(Dispatch(count))
        return actions

    def _dispatch_now(self, state: SchedulerState, pool: RolloutPool, joining: list[CellView],
                      returning: list[CellView]) -> int:
        """Executions to start now. While cells are on their way back to rollout, the serving cells take
        their share of what every cell will hold once those land (at least what they serve at full speed):
        sessions stay on the cell they start on, so filling the few serving cells now would leave them
        packed while the returning ones sit nearly empty."""
        budget, running = self.dispatch_budget(state), self.running(state)
        serving = pool.serving - sum(state.hosted_capacity(cell) for cell in joining)
        if not (pool.incoming or returning):
            return min(budget, max(0, serving - running))
        serving_cells = pool.serving_cells - len(joining)
        cells_after = pool.heading_cells - len(joining) + len(returning)
        capacity_after = (pool.heading - sum(state.hosted_capacity(cell) for cell in joining)
                          + sum(state.hosted_capacity(cell) for cell in returning))
        total = running + min(budget, max(0, capacity_after - running))
        share = total * serving_cells // max(1, cells_after)
        room = min(serving, max(pool.serving_fast - sum(state.hosted_fast(cell) for cell in joining), share))
        return min(budget, max(0, room - running))

    def _spreading(self, state: SchedulerState, pool: RolloutPool, work: int, core_too: bool) -> list[CellView]:
        """Training cells with nothing to do that go back to rollout: as many as ``w`` needs at full capacity,
        or, while the next batch is not near, as many as spread the sessions one per cell (every session a
        cell holds beyond one slows the others down)."""
        if work > pool.heading:
            return self._returning(state, work - pool.heading, core_too=core_too)
        if work > pool.heading_cells and self.trainable(state) < self.SPREAD_BELOW * self.cfg.batch_size:
            return self._returning(state, work - pool.heading_cells, core_too=core_too, per_cell=1)
        return []

    def _step_joiners(self, state: SchedulerState, pool: RolloutPool, work: int, in_place: bool = False) -> list[CellView]:
        """Satellites that join the step: those whose sessions the other rollout cells can take at full
        capacity, as many as each compute at least its join time (``_useful_joiners``), or, if more, those
        whose sessions the other cells can take at full speed (``SchedulerState.hosted_fast``), as long as the step's
        compute outlasts a join. Packing sessions to full capacity buys training cells at the cost of
        slower executions, worth it only for a cell that trains long enough; a cell that rollout does not
        need at all costs nothing and shortens the step (a small batch on a large cluster)."""
        useful = self._useful_joiners(state, pool.trainers, in_place)
        packed = self._joining(state, pool.heading - work, fast=False)
        if not any(state.hosted_fast(cell) < state.hosted_capacity(cell) for cell in state.cells):
            return packed if useful is None else packed[:useful]  # no session slows down when packed
        if state.train_left_s is None:
            packed = []  # a step of unknown size (the first) is not worth slowing its batch's last executions
        elif useful is not None:
            packed = packed[:useful]
        free = self._joining(state, pool.heading_fast - work, fast=True)
        if state.train_left_s is not None and state.join_s and not in_place \
                and state.train_left_s <= state.join_s * max(1, pool.trainers):
            free = []
        return free if len(free) > len(packed) else packed

    @staticmethod
    def _round_trip_fits(state: SchedulerState, wait_left: float | None) -> bool:
        """Whether a training cell sent back to rollout now can be back in training before the batch is
        ready (always, until the observer has measured the wait and a join)."""
        if wait_left is None or state.join_s is None:
            return True
        return wait_left >= (state.return_s or 0.0) + state.join_s

    def _useful_joiners(self, state: SchedulerState, trainers: int, in_place: bool = False) -> int | None:
        """Most satellites that can still join the step and each compute at least their own join time,
        with ``m`` cells training and ``k`` joining: after ``d`` seconds into a step of ``L`` cell-seconds,
        ``(L - m d) / (m + k) >= d``; in place before it starts (``in_place``), ``L / (m + k) >= d``.
        None when the observer has not measured ``L`` or ``d`` yet."""
        if state.train_left_s is None or not state.join_s:
            return None
        steps = int(state.train_left_s / state.join_s)
        return max(0, steps - trainers if in_place else steps - 2 * max(1, trainers))

    def _joined_in(self, cell: CellView, phase: int) -> bool:
        """Whether ``cell`` was moved to training during ``phase`` (it then stays until the phase ends)."""
        return self._moved.get(cell.id) == (phase, Role.TRAIN)

    def _move(self, cells: list[CellView], to: Role, state: SchedulerState) -> list[Action]:
        phase = self.phase(state)
        for cell in cells:
            self._moved[cell.id] = (phase, to)
        return [SwitchCell(cell.id, to) for cell in cells]

    def _returning(self, state: SchedulerState, missing: int, core_too: bool,
                   per_cell: int | None = None) -> list[CellView]:
        """Cells in training that go back to serve ``missing`` more executions (``per_cell`` each if given,
        else at full capacity): satellites last-first, then the core."""
        phase, chosen = self.phase(state), []
        satellites = [cell for cell in reversed(state.cells) if not cell.is_core]
        for cell in [*satellites, state.core] if core_too else satellites:
            if missing <= 0:
                break
            if cell.role == Role.TRAIN and not self._joined_in(cell, phase):
                chosen.append(cell)
                missing -= per_cell or state.hosted_capacity(cell)
        return chosen

    def _joining(self, state: SchedulerState, spare: int, fast: bool = False) -> list[CellView]:
        """Satellites whose whole capacity (at full speed if ``fast``) the outstanding work does not need:
        free ones first (``CellView.free``: they hold no session's KV, so leaving moves nothing), then
        last-first."""
        chosen: list[CellView] = []
        candidates = [cell for cell in reversed(state.cells) if not cell.is_core and cell.role == Role.ROLLOUT]
        for cell in sorted(candidates, key=lambda cell: not cell.free):  # stable: last-first within each kind
            size = state.hosted_fast(cell) if fast else state.hosted_capacity(cell)
            if size > spare:
                break
            chosen.append(cell)
            spare -= size
        return chosen


POLICIES: dict[str, type[Policy]] = {cls.name: cls for cls in (ColocatePolicy, AsyncPolicy, ElasticPolicy)}


def make_policy(cfg: SchedulerConfig) -> Policy:
    if cfg.name not in POLICIES:
        raise ValueError(f"scheduler.name must be one of {sorted(POLICIES)}, got {cfg.name!r}")
    return POLICIES[cfg.name](cfg)
