"""Sessions on rollout cells: where each live execution sits and how far it has got.

Progress is computed in aggregated chunks. Between two events that touch a cell, the cell's resident count
``n`` and so its per-session speed are constant, and every resident advances by the same wall time; the
cell is brought up to date only when something on it changes (a session arrives, leaves or finishes), so
an event costs O(residents of one cell), never O(all executions). Within an execution, decode work and
fixed time (tools, prefill) are interleaved uniformly: advancing by ``dt`` consumes the same fraction of
both. A KV migration delay is served first (it is added to the session's next call).

A cell holding more sessions than its capacity time-shares it: each session progresses ``capacity / n`` as
fast (waiting sessions pause), which is what decode throughput sharing amounts to.

Parking (``sim.parking``) is modelled in the same aggregate way, never call by call. A session in a tool
gap the park rule chose holds no slot: its parked seconds are part of its fixed time, which runs on at wall
speed whatever the cell's load, and its restores are fixed time too (``gyre.sim.workload``). So a cell
serves ``capacity = slots / slot_share`` sessions (``gyre.sim.rates``) before it time-shares, and at any
moment ``phi(n)`` of its ``n`` sessions hold a slot (``active``). A cell that leaves rollout parks all its
sessions: the ``phi`` share in a slot (mid-call) moves its KV to their new cells as a migration; the parked
ones move nothing (their restore on whatever cell their next call lands is in their fixed time already).
Without parking ``phi`` is 1: every session holds its slot, and every one migrates. With parking the
serving cells are kept level (``rebalance``): a parked session's next call may go to any rollout cell.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from gyre.sim.rates import RolloutRates
from gyre.sim.workload import Executions

ORPHAN = -1  # live but on no cell (no rollout cell to migrate to): paused
DONE = -2


class ExecutionTable:
    """Column store of every dispatched execution, indexed by execution id (dispatch order)."""

    FIELDS = ("calls", "decode0", "fixed0", "tool_s", "parked_s", "restore_s", "rem_decode", "rem_fixed", "delay", "tree_tokens", "policy_tokens",
              "dispatch_t", "deadline", "finish_t", "progress", "cell_s")
    INT_FIELDS = ("version", "cell", "finishes", "timed_out")

    def __init__(self) -> None:
        self.size = 0
        self._alloc(4096)

    def _alloc(self, capacity: int) -> None:
        for name in self.FIELDS:
            old = getattr(self, name, None)
            new = np.zeros(capacity)
            if old is not None:
                new[: self.size] = old[: self.size]
            setattr(self, name, new)
        for name in self.INT_FIELDS:
            old = getattr(self, name, None)
            new = np.zeros(capacity, dtype=np.int64)
            if old is not None:
                new[: self.size] = old[: self.size]
            setattr(self, name, new)
        self.capacity = capacity

    def add(self, batch: Executions, fixed_s: np.ndarray, version: int, now: float, timeout: float | None) -> range:
        count = len(batch)
        while self.size + count > self.capacity:
            self._alloc(self.capacity * 2)
        ids = range(self.size, self.size + count)
        sl = slice(self.size, self.size + count)
        self.calls[sl] = batch.calls
        self.decode0[sl] = self.rem_decode[sl] = batch.decode
        self.fixed0[sl] = self.rem_fixed[sl] = fixed_s
        self.tool_s[sl] = batch.tool_s
        self.parked_s[sl] = batch.parked_s
        self.restore_s[sl] = batch.restore_s
        self.delay[sl] = 0.0
        self.tree_tokens[sl] = batch.tree_tokens
        self.policy_tokens[sl] = batch.decode
        self.dispatch_t[sl] = now
        self.deadline[sl] = now + timeout if timeout is not None else math.inf
        self.finish_t[sl] = math.nan
        self.progress[sl] = 0.0
        self.cell_s[sl] = 0.0
        self.version[sl] = version
        self.cell[sl] = ORPHAN
        self.finishes[sl] = 0
        self.timed_out[sl] = 0
        self.size += count
        return ids

    def fraction_done(self, idx: np.ndarray) -> np.ndarray:
        total = self.decode0[idx] + self.fixed0[idx]
        left = self.rem_decode[idx] + self.rem_fixed[idx]
        return np.where(total > 0, 1.0 - left / np.maximum(total, 1e-300), 1.0)


class RolloutPool:
    """Residents of every rollout cell and their progress; the engine asks it when the next one finishes."""

    def __init__(self, rates: RolloutRates, cells: int, table: ExecutionTable, migration_gb_s: float,
                 max_context: int):
        self.rates, self.table = rates, table
        self.cap = rates.capacity
        self.migration_gb_s, self.max_context = migration_gb_s, max_context
        self.residents: list[list[int]] = [[] for _ in range(cells)]
        self.n = np.zeros(cells, dtype=np.int64)
        self.last = np.zeros(cells)
        self.serving = np.zeros(cells, dtype=bool)  # in ROLLOUT role: may hold sessions
        self.orphans: list[int] = []
        self.migrations = 0  # sessions whose KV moved to another cell (a cell left rollout, or rehoming)
        self.migration_s = 0.0
        self.moved_while_parked = 0  # sessions that changed cells while parked: nothing moved

    # Progress ------------------------------------------------------------------------------------------

    def _speed(self, n: int) -> tuple[float, float]:
        """(tokens/s per session, time share) with ``n`` residents."""
        return float(self.rates.speed[min(n, self.cap)]), min(1.0, self.cap / n)

    def advance(self, cell: int, now: float) -> None:
        """Bring the residents of ``cell`` up to ``now`` at the speed they had since the cell last changed."""
        dt = now - self.last[cell]
        self.last[cell] = now
        n = int(self.n[cell])
        if dt <= 0 or n == 0:
            return
        t = self.table
        idx = np.fromiter(self.residents[cell], dtype=np.int64, count=n)
        speed, share = self._speed(n)
        work = dt * share
        delay = t.delay[idx]
        used = np.minimum(delay, work)
        t.delay[idx] = delay - used
        left = work - used
        rem_d, rem_f = t.rem_decode[idx], t.rem_fixed[idx]
        remaining = rem_d / speed + rem_f
        frac = np.where(remaining > 0, np.minimum(1.0, left / np.maximum(remaining, 1e-300)), 1.0)
        t.rem_decode[idx] = rem_d * (1.0 - frac)
        t.rem_fixed[idx] = rem_f * (1.0 - frac)
        t.cell_s[idx] += dt * float(self.rates.utilisation[min(n, self.cap)]) / n

    def _time_left(self, idx: np.ndarray, n: int) -> np.ndarray:
        t = self.table
        speed, share = self._speed(n)
        return (t.delay[idx] + t.rem_decode[idx] / speed + t.rem_fixed[idx]) / share

    def next_finish(self, cell: int) -> float:
        """Time the first resident of ``cell`` finishes or times out (cell must be up to date)."""
        n = int(self.n[cell])
        if n == 0:
            return math.inf
        idx = np.fromiter(self.residents[cell], dtype=np.int64, count=n)
        ends = np.minimum(self.last[cell] + self._time_left(idx, n), self.table.deadline[idx])
        return float(ends.min())

    def pop_due(self, cell: int, now: float, tol: float) -> list[int]:
        """Remove and return residents of ``cell`` that have finished or timed out by ``now``."""
        self.advance(cell, now)
        n = int(self.n[cell])
        if n == 0:
            return []
        idx = np.fromiter(self.residents[cell], dtype=np.int64, count=n)
        done_work = self._time_left(idx, n) <= tol
        due = done_work | (self.table.deadline[idx] <= now + tol)
        if not due.any():
            return []
        finished = idx[due].tolist()
        self.table.timed_out[idx[due & ~done_work]] = 1
        self.residents[cell] = idx[~due].tolist()
        self.n[cell] = n - len(finished)
        return finished

    # Placement -----------------------------------------------------------------------------------------

    def place(self, ids: list[int] | range, now: float) -> set[int]:
        """Put sessions on the least-loaded serving cells (water-filling); orphans if none serve.

        Only the cells that receive sessions are brought up to date. Returns them (the caller reschedules
        their next finish).
        """
        ids = list(ids)
        serving = np.flatnonzero(self.serving)
        if len(serving) == 0:
            self.orphans.extend(ids)
            self.table.cell[ids] = ORPHAN
            return set()
        loads = self.n[serving].copy()
        targets: list[int] = []
        if len(ids) <= 16:
            for _ in ids:
                pick = int(np.argmin(loads))
                targets.append(int(serving[pick]))
                loads[pick] += 1
        else:
            heap = [(int(load), int(cell)) for load, cell in zip(loads, serving)]
            heapq.heapify(heap)
            for _ in ids:
                load, cell = heapq.heappop(heap)
                targets.append(cell)
                heapq.heappush(heap, (load + 1, cell))
        groups: dict[int, list[int]] = {}
        for ident, cell in zip(ids, targets):
            groups.setdefault(cell, []).append(ident)
        for cell, group in groups.items():
            self.advance(cell, now)  # at the old load, before it changes
            self.residents[cell].extend(group)
            self.n[cell] += len(group)
            self.table.cell[group] = cell
        return set(groups) | self.rebalance(now)

    def evict(self, cell: int, now: float) -> list[int]:
        """Take every session off ``cell`` (it stops serving) and charge each its KV migration."""
        self.advance(cell, now)
        moved = self.residents[cell]
        self._charge_migration(moved, self.in_slot_share(int(self.n[cell])))
        self.residents[cell] = []
        self.n[cell] = 0
        return moved

    def remove(self, ids: list[int], now: float) -> set[int]:
        """Take these live sessions off their cells (aborted); returns the cells that lost one."""
        gone = set(ids)
        cells = {int(self.table.cell[ident]) for ident in ids} - {ORPHAN, DONE}
        for cell in cells:
            self.advance(cell, now)  # at the old load, before it changes
            self.residents[cell] = [ident for ident in self.residents[cell] if ident not in gone]
            self.n[cell] = len(self.residents[cell])
        if self.orphans:
            self.orphans = [ident for ident in self.orphans if ident not in gone]
        return cells

    def in_slot_share(self, n: int) -> float:
        """Share of a cell's ``n`` sessions holding a slot at a given moment (1 without parking)."""
        return float(self.rates.phi[min(n, self.cap)]) if self.rates.parking else 1.0

    def _charge_migration(self, ids: list[int], in_slot: float = 1.0) -> None:
        """Sessions leaving their cell: the ``in_slot`` share of them (mid-call: their KV is on the cell) wait
        for it to move, each the expected ``in_slot`` of its own migration time; parked ones move nothing."""
        if not ids:
            return
        idx = np.asarray(ids, dtype=np.int64)
        t = self.table
        context = np.minimum(self.max_context, t.tree_tokens[idx] * t.fraction_done(idx))
        cost = in_slot * self.rates.migration_seconds(context, self.migration_gb_s)
        t.delay[idx] += cost
        self.migrations += len(ids) * in_slot
        self.moved_while_parked += len(ids) * (1.0 - in_slot)
        self.migration_s += float(cost.sum())

    def rehome(self, now: float) -> set[int]:
        """After a cell starts serving: place orphans, and move sessions beyond capacity off full cells."""
        moving, self.orphans = self.orphans, []
        touched: set[int] = set()
        for cell in np.flatnonzero(self.serving & (self.n > self.cap)):
            cell = int(cell)
            self.advance(cell, now)
            extra = self.residents[cell][self.cap:]
            self._charge_migration(extra, self.in_slot_share(int(self.n[cell])))
            self.residents[cell] = self.residents[cell][: self.cap]
            self.n[cell] = self.cap
            moving.extend(extra)
            touched.add(cell)
        if moving:
            touched |= self.place(moving, now)
        return touched | self.rebalance(now)

    def rebalance(self, now: float) -> set[int]:
        """With parking, even out the serving cells' sessions (returns the cells it changed). A parked
        session's next call goes to the least-loaded rollout cell, whose restore is in its fixed time
        already, so the router keeps cells level at no cost; here that happens whenever sessions arrive,
        leave or a cell starts serving. Without parking a session stays on its cell (its KV is there)."""
        serving = np.flatnonzero(self.serving)
        if not self.rates.parking or len(serving) < 2:
            return set()
        n = self.n[serving]
        if n.max() - n.min() < 2:
            return set()
        base, extra = divmod(int(n.sum()), len(serving))
        target = np.full(len(serving), base, dtype=np.int64)
        target[np.argsort(-n, kind="stable")[:extra]] += 1  # the fullest keep the remainder: fewest moves
        moving: list[int] = []
        touched: set[int] = set()
        for i in np.flatnonzero(n > target):
            cell, keep = int(serving[i]), int(target[i])
            self.advance(cell, now)  # at the old load, before it changes
            moving.extend(self.residents[cell][keep:])
            self.residents[cell] = self.residents[cell][:keep]
            self.n[cell] = keep
            touched.add(cell)
        self.moved_while_parked += len(moving)
        for i in np.flatnonzero(n < target):
            cell, need = int(serving[i]), int(target[i] - n[i])
            self.advance(cell, now)
            group, moving = moving[:need], moving[need:]
            self.residents[cell].extend(group)
            self.n[cell] += len(group)
            self.table.cell[group] = cell
            touched.add(cell)
        return touched

    # Observation ---------------------------------------------------------------------------------------

    def used_capacity(self) -> float:
        """Serving cells' throughput in use, in full-cell units (for the idle ledger)."""
        loads = np.minimum(self.n[self.serving], self.cap)
        return float(self.rates.utilisation[loads].sum())

    def active(self) -> np.ndarray:
        """Sessions holding a slot on each cell now: every resident without parking, else the ``phi`` share
        of them (at most the slots)."""
        if not self.rates.parking:
            return self.n.copy()
        phi = self.rates.phi[np.minimum(self.n, self.cap)]
        return np.minimum(self.rates.slots, np.rint(self.n * phi)).astype(np.int64)

    @property
    def live(self) -> int:
        return int(self.n.sum()) + len(self.orphans)
