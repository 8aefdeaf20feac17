"""The discrete-event loop: a heap of timed events, the real scheduler policy consulted after each batch.

Events are the only moments the scheduler-visible state changes: an execution finishes (or times out), a
cell finishes switching, a satellite finishes pulling weights, a training step finishes its compute or its
weight-sync tail. After the events at one instant are handled the policy is asked ``decide(state)`` and its
actions applied, again and again until it asks for nothing that changes the state; then the clock jumps to
the next event. Model calls inside an execution are not events (see ``rollout.py``), which is what keeps
thousands of GPUs and tens of thousands of executions within seconds.

The simulator never decides anything itself: it builds a ``SchedulerState`` like the driver does and
applies ``Dispatch``, ``SwitchCell`` and ``StartTrainStep`` as faithfully as it can, failing loudly when an
action cannot be applied (that would be a policy bug).
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import Counter

import numpy as np

from gyre.scheduler import (
    AbortStale,
    Action,
    CellView,
    Dispatch,
    Policy,
    Role,
    SchedulerConfig,
    SchedulerState,
    StartTrainStep,
    SwitchCell,
    VersionCounts,
    make_policy,
)
from gyre.scheduler.rate import ReadyRate
from gyre.sim.ledger import Counts, Ledger
from gyre.sim.metrics import step_records
from gyre.sim.result import SimResult
from gyre.sim.rollout import DONE, ExecutionTable, RolloutPool
from gyre.sim.training import COMPUTE, SYNC, TrainingStep
from gyre.sim.world import World

CELL, SWITCH, PULL, TRAIN, TICK = 0, 1, 2, 3, 4
MAX_DECIDE_ROUNDS = 10_000  # per instant; more means the policy and the simulator disagree about the state


class SimulationError(RuntimeError):
    """The run cannot continue (a policy asked for something impossible, or nothing can make progress)."""


class Simulator:
    def __init__(self, world: World, scheduler: SchedulerConfig, policy: Policy | None = None):
        self.world = world
        self.root = world.root
        sim = self.root.sim
        self.sched = scheduler
        self.policy = policy or make_policy(scheduler)
        self.rates, self.train = world.rates, world.train
        self.table = ExecutionTable()
        self.pool = RolloutPool(world.rates, sim.cells, self.table, sim.rollout.migration_gb_s,
                                sim.rollout.max_context_tokens)
        self.ledger = Ledger(sim.cells)
        self.cap = world.rates.capacity  # sessions a rollout cell serves (its slots, more with parking)
        self.slots = world.rates.slots  # what the scheduler sees as a cell's capacity
        self.ids = [f"c{i}" for i in range(sim.cells)]
        self.index = {name: i for i, name in enumerate(self.ids)}
        self.roles: list[Role] = [Role.ROLLOUT] * sim.cells
        self.switching_to: list[Role | None] = [None] * sim.cells
        self.fast = world.rates.fast_capacity
        self.views = [CellView(name, Role.ROLLOUT, is_core=i == 0, capacity=self.slots, fast_capacity=self.fast,
                               active=0) for i, name in enumerate(self.ids)]
        self.active = np.zeros(sim.cells, dtype=np.int64)  # sessions in a slot, as the views show them
        self.view_tuple: tuple[CellView, ...] = tuple(self.views)
        self.role_count = {role: 0 for role in Role}
        self.role_count[Role.ROLLOUT] = sim.cells
        self.pool.serving[:] = True
        for i in range(sim.cells):
            self.ledger.role(0.0, i, Role.ROLLOUT.value)
        self.now = 0.0
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = itertools.count()
        self.cell_epoch = np.zeros(sim.cells, dtype=np.int64)
        self.step: TrainingStep | None = None
        self.version = 0
        self.steps_done = 0
        self.dispatched = 0
        self.finished = 0
        # GRPO groups: ids [k g, (k + 1) g) are group k (dispatch is in whole groups). A group's executions
        # become ready together once all have finished; until then all of them count as running, as in
        # the driver's buffer.
        self.group_size = sim.group_size
        self.group_left: list[int] = []
        self.grouped_done = 0  # executions of complete groups
        self.open_groups: dict[int, int] = {}  # group -> version it was dispatched under, until complete or aborted
        self.aborted_ids: list[int] = []
        self.version_counts = {"running": Counter(), "ready": Counter()}  # executions per policy version
        self._versions: dict[str, VersionCounts] | None = None  # the counts as the state shows them (cached)
        self.ready: list[int] = []
        self.ready_versions: list[int] = []
        self.staleness: list[int] = []
        self.trained_ids: list[int] = []
        self.dropped_ids: list[int] = []
        self.switches = 0
        self.events = 0
        self.decide_calls = 0
        self.step_end: list[float] = []
        self.phases_at_step_end: list[dict] = []  # the ledger's split by phase at each step's end (cumulative)
        self.train_compute: list[float] = []
        self.train_flops = 0.0
        self.last_sample: tuple[int, int, int] | None = None
        self.step_log: list[dict] = []  # per step: start, end, executions trained, tokens
        self.switch_log: list[tuple[float, str]] = []  # (time, "rollout_to_train" | "train_to_rollout")
        self.decide_interval = self.root.sim.decide_interval_s
        self.join_s = sim.switch.rollout_to_train_s + sim.train.weight_sync_s
        self.ready_rate = ReadyRate(scheduler.batch_size, clock=lambda: self.now)
        self.next_decide = 0.0
        self.tick_pending = False

    # Public --------------------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self.steps_done >= self.root.sim.steps

    def run(self) -> SimResult:
        started = time.perf_counter()
        self._decide()
        while not self.done:
            if not self.heap:
                raise SimulationError(self._stall_message())
            self._handle_next_instant()
            self._maybe_decide()
        wall = self.now
        for cell in np.flatnonzero(self.pool.n):
            self.pool.advance(int(cell), wall)  # bring every live session's accounting up to the wall
        at_wall = self.ledger.snapshot()
        capped_at_wall = self.ledger.rollout_idle_capped
        cell_s_at_wall = self.table.cell_s[: self.table.size].copy()
        live_at_end = self.pool.live
        ready_at_end = len(self.ready)
        if self.root.sim.drain:
            self._drain()
        return self._result(wall, at_wall, capped_at_wall, cell_s_at_wall, live_at_end, ready_at_end,
                            time.perf_counter() - started)

    # Clock and events ----------------------------------------------------------------------------------

    def _tol(self) -> float:
        return 1e-9 * max(1.0, abs(self.now))

    def _push(self, when: float, kind: int, a: int, b: int) -> None:
        heapq.heappush(self.heap, (when, next(self.seq), kind, a, b))

    def _counts(self) -> Counts:
        step = self.step
        train = self.role_count[Role.TRAIN]
        compute = overhead = 0
        if step is not None:
            if step.phase == COMPUTE:
                compute = 0 if step.stalled else len(step.contributors)
                overhead = len(step.pulling)
            else:
                overhead = train
        serving = self.role_count[Role.ROLLOUT]
        return Counts(serving=serving, rollout_busy=self.pool.used_capacity() if serving else 0.0,
                      switching=self.role_count[Role.SWITCHING], train=train, train_compute=compute,
                      train_overhead=overhead, other=self.role_count[Role.IDLE] + self.role_count[Role.DEAD])

    def _advance_clock(self, when: float) -> None:
        if when < self.now - self._tol():
            raise SimulationError(f"event at t={when} is before the clock t={self.now}")
        when = max(when, self.now)
        counts = self._counts()
        # Idle rollout throughput while nothing may be dispatched: the look-ahead bound, not the policy.
        capped = (when > self.now and counts.serving > counts.rollout_busy
                  and self.policy.dispatch_budget(self._observe()) == 0)
        self.ledger.integrate(when - self.now, counts, capped, stepping=self.step is not None)
        self.now = when

    def _handle_next_instant(self) -> None:
        self._advance_clock(self.heap[0][0])
        limit = self.now + self._tol()
        while self.heap and self.heap[0][0] <= limit:
            _, _, kind, a, b = heapq.heappop(self.heap)
            self.events += 1
            if kind == CELL:
                self._on_cell(a, b)
            elif kind == SWITCH:
                self._on_switch_done(a)
            elif kind == PULL:
                self._on_pull_done(a, b)
            elif kind == TRAIN:
                self._on_train(a, b)
            else:
                self.tick_pending = False

    def _reschedule_cell(self, cell: int) -> None:
        self.cell_epoch[cell] += 1
        when = self.pool.next_finish(cell)
        if when < math.inf:
            # max: a session that was orphaned (paused) past its deadline times out as soon as it is placed
            self._push(max(when, self.now), CELL, cell, int(self.cell_epoch[cell]))

    def _reschedule_train(self) -> None:
        step = self.step
        assert step is not None
        step.epoch += 1
        when = step.compute_eta(self.train.cell_flops) if step.phase == COMPUTE else step.sync_end
        if when < math.inf:
            self._push(when, TRAIN, step.index, step.epoch)

    def _on_cell(self, cell: int, epoch: int) -> None:
        if epoch != self.cell_epoch[cell]:
            return  # superseded: the cell changed since this finish time was computed
        for ident in self.pool.pop_due(cell, self.now, self._tol()):
            self._finish(ident)
        for touched in self.pool.rebalance(self.now) - {cell}:  # parked sessions' next calls level the cells
            self._reschedule_cell(touched)
        self._reschedule_cell(cell)

    def _finish(self, ident: int) -> None:
        t = self.table
        t.progress[ident] = 1.0 if not t.timed_out[ident] else float(t.fraction_done(np.array([ident]))[0])
        t.cell[ident] = DONE
        t.finishes[ident] += 1
        t.finish_t[ident] = self.now
        self.finished += 1
        group = ident // self.group_size
        self.group_left[group] -= 1
        if self.group_left[group] == 0:
            members = range(group * self.group_size, (group + 1) * self.group_size)
            version = self.open_groups.pop(group)  # one dispatch: one version for the whole group
            self._count("running", version, -len(members))
            self._count("ready", version, len(members))
            self.ready.extend(members)
            self.ready_versions.extend([version] * len(members))
            self.ready_rate.add(len(members))
            self.grouped_done += len(members)
            if self.step is not None and self.step.waiting > 0:
                self._stream_in(self.step.waiting)

    def _on_switch_done(self, cell: int) -> None:
        to = self.switching_to[cell]
        if self.roles[cell] is not Role.SWITCHING or to is None:
            raise SimulationError(f"switch of cell {self.ids[cell]} completed but it is {self.roles[cell].value}")
        self._set_role(cell, to)
        if to is Role.ROLLOUT:
            self.pool.serving[cell] = True
            self.pool.last[cell] = self.now
            for touched in self.pool.rehome(self.now):
                self._reschedule_cell(touched)
        elif to is Role.TRAIN and self.step is not None and self.step.phase == COMPUTE:
            sync = self.root.sim.train.weight_sync_s
            if sync > 0:
                self.step.pulling[cell] = self.now + sync
                self._push(self.now + sync, PULL, cell, self.step.index)
            else:
                self.step.advance(self.now, self.train.cell_flops)
                self.step.join(cell)
                self._reschedule_train()

    def _on_pull_done(self, cell: int, step_index: int) -> None:
        step = self.step
        if step is None or step.index != step_index or cell not in step.pulling or step.phase != COMPUTE:
            return  # the step ended, or the cell left, while it was pulling
        step.advance(self.now, self.train.cell_flops)
        step.join(cell)
        self._reschedule_train()

    def _on_train(self, step_index: int, epoch: int) -> None:
        step = self.step
        if step is None or step.index != step_index or step.epoch != epoch:
            return
        if step.phase == COMPUTE:
            step.advance(self.now, self.train.cell_flops)
            step.remaining = 0.0
            if step.waiting > 0:
                return  # stalled until more executions stream in
            step.phase = SYNC
            step.compute_end = self.now
            step.pulling.clear()
            self.train_compute.append(self.now - step.started)
            tail = self.root.sim.train.step_overhead_s + self.root.sim.train.weight_sync_s
            step.sync_end = self.now + tail
            self._reschedule_train()
            return
        self.version += 1
        self.steps_done += 1
        self.step_end.append(self.now)
        self.phases_at_step_end.append({"t": self.now, **self.ledger.phase_snapshot()})
        self.step_log[-1]["end"] = self.now
        self.step = None

    # Policy --------------------------------------------------------------------------------------------

    def _view(self, cell: int, role: Role, switching_to: Role | None = None) -> CellView:
        return CellView(self.ids[cell], role, is_core=cell == 0, capacity=self.slots, switching_to=switching_to,
                        fast_capacity=self.fast, active=int(self.active[cell]))

    def _refresh_active(self) -> None:
        """Bring the views' ``active`` (sessions in a slot per cell) up to the pool, rebuilding only the views
        that changed (a decision looks at them; a cluster of hundreds of cells changes a few per event)."""
        active = self.pool.active()
        changed = np.flatnonzero(active != self.active)
        if len(changed) == 0:
            return
        self.active = active
        for cell in changed:
            self.views[cell] = self._view(int(cell), self.roles[cell], self.switching_to[cell])
        self.view_tuple = tuple(self.views)

    def _observe(self) -> SchedulerState:
        self._refresh_active()
        left = None
        if self.root.sim.executions is not None:
            left = self.root.sim.executions - self.dispatched
        if self._versions is None:
            self._versions = {k: tuple(sorted((v, n) for v, n in c.items() if n)) for k, c in self.version_counts.items()}
        return SchedulerState(
            cells=self.view_tuple, policy_version=self.version,
            running=self.dispatched - self.grouped_done - len(self.aborted_ids), ready=len(self.ready),
            ready_versions=self._versions["ready"], running_versions=self._versions["running"],
            training=self.step is not None, steps_done=self.steps_done, total_steps=self.root.sim.steps,
            executions_left=left, train_left_s=self._train_left_s(), join_s=self.join_s,
            return_s=self.root.sim.switch.train_to_rollout_s, ready_rate=self.ready_rate.rate(),
            step_waiting=self.step.waiting if self.step is not None else 0, slot_share=self.rates.slot_share,
            parked=self.pool.live - int(self.active.sum()) if self.rates.parking else 0)

    def _train_left_s(self) -> float | None:
        """Compute the running step still needs (one cell's seconds); with none running, the next step's
        estimate from the steps so far (what a driver can measure), None before the first."""
        step, cell_flops = self.step, self.train.cell_flops
        if step is not None:
            if step.phase != COMPUTE:
                return 0.0
            done = (self.now - step.last) * len(step.contributors) * cell_flops
            coming = step.waiting * self.train_flops / len(self.trained_ids) if self.trained_ids else 0.0
            return (max(0.0, step.remaining - done) + coming) / cell_flops
        if not self.trained_ids:
            return None
        return self.train_flops / len(self.trained_ids) * self.sched.batch_size / cell_flops

    def _maybe_decide(self) -> None:
        """Consult the policy now, or at the next decision tick when ``sim.decide_interval_s`` > 0.

        With an interval the policy sees every event's effect, but at most once per interval (a driver
        polling its scheduler); 0 consults it after every instant that has events (exact).
        """
        if self.decide_interval <= 0 or self.now >= self.next_decide - self._tol():
            self._decide()
            self.next_decide = self.now + self.decide_interval
        elif not self.tick_pending:
            self._push(self.next_decide, TICK, 0, 0)
            self.tick_pending = True

    def _decide(self) -> None:
        for _ in range(MAX_DECIDE_ROUNDS):
            if self.done:
                break
            actions = self.policy.decide(self._observe())
            self.decide_calls += 1
            changed = False
            for action in actions:
                changed = self._apply(action) or changed
            if not changed:
                break
        else:
            raise SimulationError(f"policy {self.policy.name} changed the state {MAX_DECIDE_ROUNDS} times at "
                                  f"t={self.now:.3f}s without settling")
        sample = (self.pool.live, len(self.ready), self.role_count[Role.TRAIN])
        if sample != self.last_sample:
            self.ledger.samples.append((self.now, *sample))
            self.last_sample = sample

    def _apply(self, action: Action) -> bool:
        """Apply one action; return whether it changed the state."""
        if isinstance(action, Dispatch):
            return self._dispatch(action.count)
        if isinstance(action, SwitchCell):
            return self._switch(action)
        if isinstance(action, StartTrainStep):
            return self._start_step(action)
        if isinstance(action, AbortStale):
            return self._abort(action.before_version)
        raise SimulationError(f"policy {self.policy.name} returned an unknown action {action!r}")

    def _dispatch(self, count: int) -> bool:
        if count <= 0:
            return False
        groups = -(-count // self.group_size)  # whole groups, rounded up (as the driver does)
        count = groups * self.group_size
        limit = self.root.sim.executions
        if limit is not None and self.dispatched + count > limit:
            raise SimulationError(f"Dispatch({count}) but only {limit - self.dispatched} of sim.executions={limit} "
                                  "tasks are left")
        batch = self.world.stream.take(self.dispatched, count)
        fixed = self.rates.fixed_seconds(batch.prefill, batch.tool_s, batch.restore_s)
        ids = self.table.add(batch, fixed, self.version, self.now, self.root.sim.workload.timeout_s)
        first_group = len(self.group_left)
        self.dispatched += count
        self.group_left += [self.group_size] * groups
        for group in range(first_group, first_group + groups):
            self.open_groups[group] = self.version
        self._count("running", self.version, count)
        for cell in self.pool.place(ids, self.now):
            self._reschedule_cell(cell)
        return True

    def _abort(self, before_version: int) -> bool:
        """Stop the groups dispatched under a version below ``before_version``: their live sessions leave the
        cells at once and their finished members are discarded (as the driver cancels a group)."""
        doomed = [group for group, version in self.open_groups.items() if version < before_version]
        if not doomed:
            return False
        g, t = self.group_size, self.table
        ids: list[int] = []
        for group in doomed:
            self._count("running", self.open_groups.pop(group), -g)
            ids.extend(range(group * g, (group + 1) * g))
        live = [ident for ident in ids if t.cell[ident] != DONE]
        for cell in self.pool.remove(live, self.now):
            self._reschedule_cell(cell)
        t.cell[live] = DONE
        t.progress[live] = t.fraction_done(np.asarray(live, dtype=np.int64)) if live else 0.0
        t.finish_t[live] = self.now
        self.aborted_ids += ids
        return True

    def _count(self, kind: str, version: int, delta: int) -> None:
        self.version_counts[kind][version] += delta
        self._versions = None

    def _set_role(self, cell: int, role: Role, switching_to: Role | None = None) -> None:
        self.role_count[self.roles[cell]] -= 1
        self.role_count[role] += 1
        self.roles[cell] = role
        self.switching_to[cell] = switching_to
        self.views[cell] = self._view(cell, role, switching_to)
        self.view_tuple = tuple(self.views)
        self.ledger.role(self.now, cell, role.value)

    def _switch(self, action: SwitchCell) -> bool:
        if action.cell_id not in self.index:
            raise SimulationError(f"SwitchCell names an unknown cell {action.cell_id!r}")
        cell = self.index[action.cell_id]
        current = self.roles[cell]
        if current in (Role.SWITCHING, action.to):
            return False
        if action.to not in (Role.ROLLOUT, Role.TRAIN) or current not in (Role.ROLLOUT, Role.TRAIN):
            raise SimulationError(f"SwitchCell({action.cell_id}, {action.to.value}) from {current.value} "
                                  "is not simulated (only rollout <-> train)")
        switch = self.root.sim.switch
        if current is Role.ROLLOUT:
            # Sessions are never interrupted: they move to the other rollout cells (KV migration).
            self.pool.serving[cell] = False
            moved = self.pool.evict(cell, self.now)
            self._reschedule_cell(cell)
            for touched in self.pool.place(moved, self.now):
                self._reschedule_cell(touched)
            cost = switch.rollout_to_train_s
            self.switch_log.append((self.now, "rollout_to_train"))
        else:
            if self.step is not None:
                self.step.advance(self.now, self.train.cell_flops)
                self.step.leave(cell)
                self._reschedule_train()
            cost = switch.train_to_rollout_s
            self.switch_log.append((self.now, "train_to_rollout"))
        self._set_role(cell, Role.SWITCHING, action.to)
        self.switches += 1
        self._push(self.now + cost, SWITCH, cell, 0)
        return True

    def _start_step(self, action: StartTrainStep) -> bool:
        if self.step is not None:
            raise SimulationError("StartTrainStep while a training step is running")
        cells = {i for i, role in enumerate(self.roles) if role is Role.TRAIN}
        if not cells:
            raise SimulationError("StartTrainStep with no cell in TRAIN")
        ready, drop, count = len(self.ready), action.drop_stale, action.count
        if count < 1 or drop < 0 or drop >= ready:
            raise SimulationError(f"StartTrainStep(count={count}, drop_stale={drop}) but {ready} executions are ready")
        dropped, _ = self._pop_oldest(drop)
        self.dropped_ids += dropped
        self.step_log.append({"start": self.now, "ids": [], "tree_tokens": 0.0, "policy_tokens": 0.0,
                              "dropped": drop, "cells": len(cells)})
        self.step = TrainingStep(index=self.steps_done, flops=0.0, started=self.now, executions=0,
                                 tree_tokens=0.0, contributors=cells, waiting=count)
        self._stream_in(count)
        return True

    def _pop_oldest(self, n: int) -> tuple[list[int], list[int]]:
        """Remove the ``n`` oldest ready executions (by the policy version they were generated under, then by
        finish order); their ids and versions."""
        order = sorted(range(len(self.ready)), key=lambda k: (self.ready_versions[k], k))
        taken, kept = order[:n], sorted(order[n:])
        ids, versions = [self.ready[k] for k in taken], [self.ready_versions[k] for k in taken]
        for version in versions:
            self._count("ready", version, -1)
        self.ready, self.ready_versions = [self.ready[k] for k in kept], [self.ready_versions[k] for k in kept]
        return ids, versions

    def _stream_in(self, most: int) -> None:
        """Hand the running step up to ``most`` ready executions, oldest first."""
        step = self.step
        assert step is not None
        used_ids, versions = self._pop_oldest(most)
        if not used_ids:
            return
        self.trained_ids += used_ids
        self.staleness += [self.version - version for version in versions]
        idx = np.asarray(used_ids, dtype=np.int64)
        tokens = float((self.table.tree_tokens[idx] * self.table.progress[idx]).sum())
        flops = self.train.flops(tokens)
        self.train_flops += flops
        log = self.step_log[-1]
        log["ids"] += used_ids
        log["tree_tokens"] += tokens
        log["policy_tokens"] += float((self.table.policy_tokens[idx] * self.table.progress[idx]).sum())
        step.advance(self.now, self.train.cell_flops)
        step.add(flops, len(used_ids), tokens)
        self._reschedule_train()

    # End of run ----------------------------------------------------------------------------------------

    def _drain(self) -> None:
        """Let in-flight executions finish (no policy, no new work) so every dispatched one ends once."""
        while self.pool.live and self.heap:
            self._handle_next_instant()
            if self.pool.live and not self.pool.serving.any():
                break  # sessions are orphaned with no rollout cell left: they stay live

    def _stall_message(self) -> str:
        roles = {role.value: n for role, n in self.role_count.items() if n}
        return (f"simulation stalled at t={self.now:.1f}s: no event pending and the policy "
                f"{self.policy.name} asks for nothing (steps {self.steps_done}/{self.root.sim.steps}, "
                f"live {self.pool.live}, ready {len(self.ready)}, dispatched {self.dispatched}, roles {roles}, "
                f"sim.executions={self.root.sim.executions})")

    def _work(self, wall: float) -> dict[str, float]:
        """Equal-work figures of the run (see ``gyre.sim.result``)."""
        t, world = self.table, self.world
        n = t.size
        trained = np.asarray(self.trained_ids, dtype=np.int64)
        decode, fixed, tokens = t.decode0[:n], t.fixed0[:n], t.tree_tokens[:n]
        rollout, train = world.rollout_work(decode, fixed), world.train_work(tokens)
        done = t.progress[trained]
        trained_rollout = float((rollout[trained] * done).sum())
        trained_work = trained_rollout + float((train[trained] * done).sum())
        nominal = world.kept_fraction(decode, fixed) * (rollout + train)
        # Executions that could have finished before the run ended, had they run alone at full speed from
        # their dispatch: what any schedule could have trained (one still running when a short run ends
        # says nothing about the policy).
        could = t.dispatch_t[:n] + world.fastest_seconds(decode, fixed) <= wall
        mean_trained = nominal[trained].mean() if len(trained) else float("nan")
        return {"trained_work_cell_s": trained_work, "trained_rollout_work_cell_s": trained_rollout,
                "trained_policy_tokens": float((t.policy_tokens[trained] * done).sum()),
                "length_bias": float(mean_trained / nominal[could].mean()) if could.any() else float("nan"),
                "length_bias_all": float(mean_trained / nominal.mean()) if n else float("nan"),
                "ideal_time_s": trained_work / self.root.sim.cells}

    def _result(self, wall: float, at_wall: dict[str, float], capped_at_wall: float, cell_s: np.ndarray,
                live_at_end: int, ready_at_end: int, host_s: float) -> SimResult:
        t = self.table
        n = t.size
        trained = np.asarray(self.trained_ids, dtype=np.int64)
        mask = np.ones(n, dtype=bool)
        mask[trained] = False
        sim = self.root.sim
        return SimResult(
            policy=self.policy.name, preset=sim.name, cells=sim.cells, gpus_per_cell=sim.gpus_per_cell,
            capacity_per_cell=self.cap, steps=sim.steps, batch_size=self.sched.batch_size,
            max_staleness=self.sched.max_staleness, max_paths=self.root.trajectory.max_paths,
            rollout_cells=self.sched.rollout_cells if self.policy.name == "async" else None,
            wall_time_s=wall, sample_ideal_time_s=self.world.ideal.time_s, **self._work(wall), cell_s=at_wall,
            staleness_mean=float(np.mean(self.staleness)) if self.staleness else 0.0,
            staleness_max=int(max(self.staleness, default=0)), switches=self.switches,
            dispatched=self.dispatched, finished=self.finished, trained=len(self.trained_ids),
            dropped=len(self.dropped_ids), aborted=len(self.aborted_ids), timed_out=int(t.timed_out[:n].sum()),
            live_at_end=live_at_end, ready_at_end=ready_at_end, wasted_rollout_cell_s=float(cell_s[mask].sum()),
            rollout_idle_capped_cell_s=capped_at_wall,
            trained_rollout_cell_s=float(cell_s[trained].sum()),
            dropped_rollout_cell_s=float(cell_s[np.asarray(self.dropped_ids, dtype=np.int64)].sum()), train_flops=self.train_flops,
            migrations=self.pool.migrations, migration_s=self.pool.migration_s, step_end_s=self.step_end,
            parking=self.rates.parking, slots_per_cell=self.slots, slot_share=self.rates.slot_share,
            trained_parked_tool_s=float((t.parked_s[trained] * t.progress[trained]).sum()),
            trained_tool_s=float((t.tool_s[trained] * t.progress[trained]).sum()),
            trained_restore_s=float((t.restore_s[trained] * t.progress[trained]).sum()),
            moved_while_parked=self.pool.moved_while_parked,
            train_compute_s=self.train_compute, sim_seconds=host_s, events=self.events,
            decide_calls=self.decide_calls, total_elapsed_s=self.ledger.elapsed,
            total_cell_s=self.ledger.snapshot(), finishes_per_execution=t.finishes[:n].tolist(),
            timeline={"roles": self.ledger.roles, "samples": self.ledger.samples, "wall": wall},
            step_records=step_records(self), phases_at_step_end=self.phases_at_step_end,
        )
