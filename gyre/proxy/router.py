"""Routing calls to rollout cells: session affinity, least-loaded placement, capacity, backpressure, drain.

- Affinity: an execution's calls all go to the cell it was placed on, so its KV caches stay warm.
- Placement: a new execution goes to the active cell with the fewest in-flight calls (then fewest
  executions), among those under ``capacity`` in-flight calls and ``max_sessions`` executions.
- Backpressure: a call whose cell is full (or, for a new execution, when no cell can take it) waits up to
  ``queue_timeout_s`` for room, then fails with ``OverloadedError`` (the API layer answers 429 / 529 with
  ``retry-after``).
- ``drain(cell, target)``: the cell stops taking executions; each of its executions is re-pointed to the
  target (or the least-loaded active cell), its in-flight calls are aborted, its sessions' KV caches are
  exported and imported into the target, and the aborted calls are retried there by the same
  ``generate`` invocation, so the client sees one normal response. The aborted attempt's partial tokens
  are discarded and the retry generates the whole response from the prompt: the record then holds one
  response sampled under one engine, never a splice of two attempts (whose log-probs could come from
  different weight versions), at the cost of regenerating a few tokens. A call is retried only if its
  attempt really ended with ``abort``; one that finished before the abort landed is returned as is, so
  a call is never lost or duplicated. ``RoutedGeneration.reroutes`` lists the moves for the record.
- Parking (``parking``, a ``ParkingConfig``; off unless set, ``Proxy`` sets it from ``proxy.parking``): when a
  call returns, its session's agent is in a tool until its next call. The router predicts that gap from the
  session's own gaps between calls (``gyre.scheduler.parking.ParkRule``; before it has one, the mean gap
  of all sessions so far) and, when it exceeds the restore cost, asks the engine to ``park`` the session
  (in the background: the response is not delayed; the engine refuses if a next call came first). The
  next call restores it on the engine, outputs unchanged. A drain parks every session it moves (without a
  call to retry) on its new cell, whatever the rule says: the sessions of a cell chosen to train wait
  for their next call off the budget of the cells that take them. An execution whose sessions are all
  parked is not tied to its cell: when its next call finds that cell full, it moves to the least-loaded
  cell with room (its parked KV exported and imported there, as a drain moves it) and the call runs there.
- A lost cell (its process died: the engine raises ``CellLostError``, or the cluster says so through
  ``lose_cell``) leaves the router at once; its executions are placed afresh, and each call in flight on it
  is retried by the same ``generate`` invocation on another cell, which recomputes the prompt (the KV died
  with the cell). The client sees one normal response; nothing of the lost attempt is recorded.

All methods run on the proxy's event loop (engines are thread-safe and awaitable from any loop).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from gyre.proxy.config import ParkingConfig
from gyre.rollout.base import (
    CellLostError,
    EngineAsleepError,
    Generation,
    KVState,
    RolloutEngine,
    SamplingParams,
    common_prefix_length,
)
from gyre.scheduler.parking import ParkRule

log = logging.getLogger(__name__)


class OverloadedError(RuntimeError):
    """No cell could take the call within the queue timeout."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class UnknownCellError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0])


@dataclass(eq=False)
class _Attempt:
    """One in-flight engine call on a cell."""

    execution_id: str
    session_id: str
    prompt_ids: list[int]
    moved: bool = False  # set by drain: an ``abort`` result means "retry on the new cell"
    interrupted: bool = False  # the abort landed: the call stopped early and is retried elsewhere
    done: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(eq=False)
class RoutedCell:
    """A rollout cell as the router sees it: an engine, limits and live counters. Not the cell of ``gyre.cells``
    (the Ray actor that owns the engine and switches role); the cluster routes to such a cell by adding one
    of these over its engine."""

    cell_id: str
    engine: RolloutEngine
    capacity: int = 64
    max_sessions: int | None = None
    draining: bool = False
    attempts: set[_Attempt] = field(default_factory=set)
    executions: set[str] = field(default_factory=set)

    @property
    def inflight(self) -> int:
        return len(self.attempts)

    def has_room(self) -> bool:
        return self.inflight < self.capacity

    def takes_new_execution(self) -> bool:
        if self.draining or not self.has_room():
            return False
        return self.max_sessions is None or len(self.executions) < self.max_sessions


@dataclass
class RoutedGeneration:
    generation: Generation
    cell_id: str
    session_id: str
    queue_s: float
    reroutes: list[dict[str, Any]]


@dataclass(frozen=True)
class Occupancy:
    """What the scheduler sees of the router's sessions (``Router.occupancy``): each routed cell's sessions
    holding an engine slot (``active``: not parked), the sessions parked now, and over recent calls the
    seconds sessions held a slot (their calls, and tool gaps they were not parked for) against the seconds
    they lived (calls and every gap); and ``parked_s``, every second a session has spent parked since the
    router started (counted when its next call ends the park)."""

    active: dict[str, int] = field(default_factory=dict)
    parked: int = 0
    held_s: float = 0.0
    lived_s: float = 0.0
    parked_s: float = 0.0

    @property
    def slot_share(self) -> float:
        """Share of a live session's time it holds a slot (1 until measured, or without parking)."""
        return min(1.0, max(self.held_s / self.lived_s, 1e-3)) if self.lived_s > 0 else 1.0

    @staticmethod
    def merged(parts: list["Occupancy"]) -> "Occupancy":
        """Several routers' (proxy replicas') occupancy over the same cells, summed."""
        active: dict[str, int] = {}
        for part in parts:
            for cell_id, sessions in part.active.items():
                active[cell_id] = active.get(cell_id, 0) + sessions
        return Occupancy(active, sum(p.parked for p in parts), sum(p.held_s for p in parts), sum(p.lived_s for p in parts),
                         sum(p.parked_s for p in parts))


@dataclass
class DrainReport:
    cell_id: str
    moved_executions: int = 0
    aborted_calls: int = 0  # calls the abort actually interrupted (one that finished first is delivered as is)
    kv_imports: int = 0
    kv_missing: int = 0
    parked: int = 0  # moved sessions parked on their new cell (parking on)
    seconds: float = 0.0


class Router:
    #: Calls over which the slot share (``Occupancy``) is measured: recent enough to follow a run's phases.
    SLOT_WINDOW = 512

    def __init__(
        self,
        cells: list[RoutedCell] | None = None,
        *,
        queue_timeout_s: float = 30.0,
        retry_after_s: float = 1.0,
        parking: ParkingConfig | None = None,
    ) -> None:
        self.cells: dict[str, RoutedCell] = {}
        self.queue_timeout_s = queue_timeout_s
        self.retry_after_s = retry_after_s
        self.parking = parking or ParkingConfig(enabled=False)
        self.clock = time.perf_counter  # what tool gaps are measured with (a test may step it by hand)
        self._affinity: dict[str, RoutedCell] = {}
        self._sessions: dict[str, set[str]] = {}  # execution -> engine session ids it used on its cell
        self._moving: dict[str, asyncio.Event] = {}
        self._changed = asyncio.Event()
        self._returned_at: dict[str, float] = {}  # session -> when its last call returned (its tool gap began)
        self._gaps: dict[str, deque[float]] = {}  # session -> its last tool gaps, seconds
        self._gap_total, self._gap_count = 0.0, 0  # every session's gaps: the prior of a session with none
        self._parked: dict[str, RoutedCell] = {}  # session -> the cell whose engine parked it (until its next call)
        # (held, lived) seconds: each call's tool gap as the call starts, then the call as it ends (two per call). The gap
        # goes in at once, as it goes into _parked_s: a step's metrics taken while the call runs see both or neither.
        self._slot_time: deque[tuple[float, float]] = deque(maxlen=2 * self.SLOT_WINDOW)
        self._parked_s = 0.0  # seconds sessions spent parked, all told
        self._background: set[asyncio.Task] = set()  # parks and ended sessions' frees, under way
        self.counters = {
            "calls": 0, "reroutes": 0, "overloaded": 0, "kv_imports": 0, "engine_asleep": 0, "cells_lost": 0,
            "parks": 0, "parks_refused": 0, "parks_skipped": 0, "parked_moves": 0,
        }
        for cell in cells or []:
            self.add_cell(cell)

    # ------------------------------------------------------------------ membership

    def add_cell(self, cell: RoutedCell) -> None:
        if cell.cell_id in self.cells:
            raise ValueError(f"cell {cell.cell_id!r} is already routed to")
        self.cells[cell.cell_id] = cell
        self._notify()

    async def remove_cell(self, cell_id: str) -> RoutedCell:
        """Drain ``cell_id`` (moving its executions) and stop routing to it; the caller owns its engine."""
        cell = self._cell(cell_id)
        await self.drain(cell_id)
        del self.cells[cell_id]
        self._notify()
        return cell

    def lose_cell(self, cell_id: str, reason: str = "lost") -> bool:
        """The cell's process died: stop routing to it now and place its executions afresh (their calls in
        flight there fail with ``CellLostError`` and are retried elsewhere). False if it was not routed to."""
        cell = self.cells.pop(cell_id, None)
        if cell is None:
            return False
        closed = reason == "closed"
        (log.info if closed else log.error)("cell %s is %s: its %d executions are placed on the other cells", cell_id,
                                             "closed" if closed else f"lost ({reason})", len(cell.executions))
        self.counters["cells_lost"] += not closed
        for execution_id in list(cell.executions):
            self._unplace(execution_id)
        for session_id in [s for s, parked_on in self._parked.items() if parked_on is cell]:
            del self._parked[session_id]
        self._notify()
        return True

    def undrain(self, cell_id: str) -> None:
        """Let the cell take executions again (e.g. it is back from training)."""
        self._cell(cell_id).draining = False
        self._notify()

    def release(self, execution_id: str) -> None:
        """Forget an ended execution's placement, and have the engines that hold its sessions' caches (its
        cell's, and where one was parked) free them in the background. (Called outside an event loop, as
        some tests do, it leaves them to age out of the engines' bounded stores.)"""
        cell = self._affinity.pop(execution_id, None)
        if cell is not None:
            cell.executions.discard(execution_id)
        frees = _loop_running()
        for session_id in self._sessions.pop(execution_id, ()):
            self._returned_at.pop(session_id, None)
            self._gaps.pop(session_id, None)
            holders = {id(c): c for c in (cell, self._parked.pop(session_id, None)) if c is not None}
            for holder in holders.values() if frees else ():
                self._in_background(self._end_session(holder, session_id))
        self._notify()

    async def _end_session(self, cell: RoutedCell, session_id: str) -> None:
        end = getattr(cell.engine, "end_session", None)
        try:
            if end is not None:
                await end(session_id)
        except Exception as error:  # a lost or sleeping cell holds nothing worth freeing
            log.debug("cell %s: end_session(%s) failed: %s", cell.cell_id, session_id, error)

    def cell_of(self, execution_id: str) -> str | None:
        cell = self._affinity.get(execution_id)
        return cell.cell_id if cell else None

    def stats(self) -> dict[str, Any]:
        return {
            **self.counters,
            "parked": len(self._parked),
            "cells": {
                cell.cell_id: {
                    "inflight": cell.inflight,
                    "executions": len(cell.executions),
                    "capacity": cell.capacity,
                    "draining": cell.draining,
                }
                for cell in self.cells.values()
            },
        }

    # ------------------------------------------------------------------ calls

    async def generate(
        self, execution_id: str, session_id: str, prompt_ids: list[int], sampling: SamplingParams
    ) -> RoutedGeneration:
        """Run one call on the execution's cell, waiting for room (bounded) and following drains."""
        start = time.perf_counter()
        reroutes: list[dict[str, Any]] = []
        queue_s = 0.0
        self.counters["calls"] += 1
        began = self.clock()
        gap, was_parked = self._tool_gap_ended(session_id)
        while True:
            waited = time.perf_counter()
            cell = await self._acquire(execution_id, resumed=session_id if was_parked else None)
            queue_s += time.perf_counter() - waited
            attempt = _Attempt(execution_id, session_id, prompt_ids)
            cell.attempts.add(attempt)
            self._sessions.setdefault(execution_id, set()).add(session_id)
            try:
                generation = await cell.engine.generate(session_id, prompt_ids, sampling)
            except EngineAsleepError as error:
                # The cell went to sleep without a drain: take it out of placement and go elsewhere.
                self.counters["engine_asleep"] += 1
                log.warning("cell %s: %s; rerouting execution %s", cell.cell_id, error, execution_id)
                cell.draining = True
                self._unplace(execution_id)
                reroutes.append({"from": cell.cell_id, "reason": "engine_asleep", "partial_tokens": 0})
                continue
            except CellLostError as error:
                self.lose_cell(cell.cell_id, str(error))  # its executions, this one too, are placed afresh
                self.counters["reroutes"] += 1
                reroutes.append({"from": cell.cell_id, "reason": "cell_lost", "partial_tokens": 0,
                                 "after_s": round(time.perf_counter() - start, 6)})
                continue
            finally:
                cell.attempts.discard(attempt)
                attempt.done.set()
                self._notify()
            if generation.finish_reason == "abort" and attempt.moved:
                attempt.interrupted = True
                self.counters["reroutes"] += 1
                reroutes.append(
                    {
                        "from": cell.cell_id,
                        "to": self.cell_of(execution_id),
                        "reason": "drain",
                        "partial_tokens": len(generation.response_ids),
                        "after_s": round(time.perf_counter() - start, 6),
                    }
                )
                moving = self._moving.get(execution_id)
                if moving is not None:
                    await moving.wait()
                continue
            call_s = max(0.0, self.clock() - began)
            self._slot_time.append((call_s, call_s))
            self._maybe_park(cell, session_id, len(prompt_ids) + len(generation.response_ids))
            return RoutedGeneration(generation, cell.cell_id, session_id, queue_s, reroutes)

    async def admit(self, execution_id: str) -> str:
        """Wait (bounded) until the execution's cell has room, without taking the slot; its cell id.

        Streaming responses call this before sending their headers, so that backpressure reaches the
        client as an HTTP 429/529 it can retry rather than as an error event inside a started stream.
        """
        return (await self._acquire(execution_id)).cell_id

    async def _acquire(self, execution_id: str, resumed: str | None = None) -> RoutedCell:
        """The cell for this execution's next call, once it has room; ``OverloadedError`` after the timeout.
        ``resumed``: the calling session, parked until this call began."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.queue_timeout_s
        while True:
            cell = self._place(execution_id, resumed)
            if cell is not None:
                return cell
            remaining = deadline - loop.time()
            if remaining <= 0:
                self.counters["overloaded"] += 1
                raise OverloadedError(self._overload_message(execution_id), self.retry_after_s)
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                pass

    def _place(self, execution_id: str, resumed: str | None = None) -> RoutedCell | None:
        if execution_id in self._moving:
            return None
        cell = self._affinity.get(execution_id)
        if cell is not None:
            if cell.has_room():
                return cell
            if resumed is not None:
                self._move_parked(execution_id, cell, resumed)
            return None
        candidates = [c for c in self.cells.values() if c.takes_new_execution()]
        if not candidates:
            return None
        cell = min(candidates, key=lambda c: (c.inflight, len(c.executions)))
        self._affinity[execution_id] = cell
        cell.executions.add(execution_id)
        return cell

    def _move_parked(self, execution_id: str, cell: RoutedCell, resumed: str) -> None:
        """A call of a parked session (``resumed``) finds its execution's cell full: if the execution's other
        sessions are parked too, it holds nothing there that cannot move, so it goes to the least-loaded cell
        with room, its parked KV with it (exported, imported and parked there, as a drain moves it; recomputed
        where it cannot move), and the call runs there."""
        sessions = self._sessions.get(execution_id, set())
        if not all(s == resumed or self._parked.get(s) is cell for s in sessions):
            return
        if any(attempt.execution_id == execution_id for attempt in cell.attempts):
            return
        others = [c for c in self.cells.values() if c is not cell and c.takes_new_execution()]
        if not others:
            return
        dest = min(others, key=lambda c: (c.inflight, len(c.executions), c.cell_id))
        self._repoint(execution_id, dest)
        for session_id in sessions:
            self._parked.pop(session_id, None)
        self.counters["parked_moves"] += 1
        self._in_background(self._move_parked_kv(execution_id, cell, dest, sorted(sessions)))

    async def _move_parked_kv(self, execution_id: str, source: RoutedCell, dest: RoutedCell, sessions: list[str]) -> None:
        try:
            await self._move(execution_id, source, dest, DrainReport(source.cell_id), 0.0)
        except Exception as error:  # e.g. the destination died: the call finds that out itself and goes on elsewhere
            log.warning("moving parked execution %s from %s to %s failed: %s", execution_id, source.cell_id,
                        dest.cell_id, error)
            return
        for session_id in sessions:  # the source keeps serving: its copies would only wait to be dropped
            await self._end_session(source, session_id)

    def _repoint(self, execution_id: str, dest: RoutedCell | None) -> None:
        """Place the execution on ``dest`` (or nowhere) as moving: its calls wait until `_move` ends."""
        self._unplace(execution_id)
        if dest is not None:
            self._affinity[execution_id] = dest
            dest.executions.add(execution_id)
        self._moving[execution_id] = asyncio.Event()

    def _unplace(self, execution_id: str) -> None:
        cell = self._affinity.pop(execution_id, None)
        if cell is not None:
            cell.executions.discard(execution_id)

    def _overload_message(self, execution_id: str) -> str:
        cell = self._affinity.get(execution_id)
        if cell is not None:
            return (
                f"cell {cell.cell_id} (this execution's cell) stayed at capacity ({cell.capacity} calls in flight) "
                f"for {self.queue_timeout_s:g}s; retry later"
            )
        active = [c.cell_id for c in self.cells.values() if not c.draining]
        return f"no rollout cell could take a new execution within {self.queue_timeout_s:g}s (active cells: {active}); retry later"

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _cell(self, cell_id: str) -> RoutedCell:
        try:
            return self.cells[cell_id]
        except KeyError:
            raise UnknownCellError(f"no cell {cell_id!r}; cells are {sorted(self.cells)}") from None

    # ------------------------------------------------------------------ parking

    def _tool_gap_ended(self, session_id: str) -> tuple[float, bool]:
        """A call on the session starts: the gap since its last call returned joins its history. (That gap in
        seconds, 0 for a first call; whether the session was parked through it.)"""
        was_parked = self._parked.pop(session_id, None) is not None
        returned = self._returned_at.pop(session_id, None)
        if returned is None:
            return 0.0, was_parked
        gap = max(0.0, self.clock() - returned)
        self._gaps.setdefault(session_id, deque(maxlen=self.parking.window)).append(gap)
        self._gap_total += gap
        self._gap_count += 1
        self._parked_s += gap if was_parked else 0.0
        self._slot_time.append((0.0 if was_parked else gap, gap))
        return gap, was_parked

    def occupancy(self) -> Occupancy:
        """Each cell's sessions holding a slot, the parked ones, and the recent slot time (see `Occupancy`)."""
        parked = set(self._parked)
        active = {cell_id: sum(1 for execution_id in list(cell.executions)
                               for session_id in self._sessions.get(execution_id, ()) if session_id not in parked)
                  for cell_id, cell in list(self.cells.items())}
        held = sum(h for h, _ in self._slot_time) if self.parking.enabled else 0.0
        lived = sum(l for _, l in self._slot_time) if self.parking.enabled else 0.0
        return Occupancy(active, len(parked), held, lived, self._parked_s)

    def _maybe_park(self, cell: RoutedCell, session_id: str, context_tokens: int) -> None:
        """A call returned: park its session in the background if its predicted tool gap outlasts a restore."""
        self._returned_at[session_id] = self.clock()
        if not self.parking.enabled:
            return
        prior = self.parking.prior_s
        if prior is None:
            prior = self._gap_total / self._gap_count if self._gap_count else 0.0
        rule = ParkRule(window=self.parking.window, prior_s=prior)
        if not rule.should_park(self._gaps.get(session_id, ()), self.parking.restore_cost_s(context_tokens)):
            self.counters["parks_skipped"] += 1
            return
        self._in_background(self._park(cell, session_id))

    def _in_background(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _park(self, cell: RoutedCell, session_id: str) -> bool:
        park = getattr(cell.engine, "park", None)
        try:
            parked = bool(await park(session_id)) if park is not None else False
        except Exception as error:  # noqa: BLE001 - e.g. the engine went to sleep or closed: nothing to free
            log.debug("cell %s: park of %s failed: %s", cell.cell_id, session_id, error)
            parked = False
        if parked and session_id in self._returned_at:  # no next call has started since (it would restore it)
            self._parked[session_id] = cell
        self.counters["parks" if parked else "parks_refused"] += 1
        return parked

    async def settle_parking(self) -> None:
        """Wait for the parks and frees asked so far (tests; a driver reading the counters at a step boundary)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # ------------------------------------------------------------------ drain

    async def drain(self, cell_id: str, target: str | None = None, *, abort_retry_s: float = 0.05) -> DrainReport:
        """Stop placing on ``cell_id`` and move every execution on it (see the module docstring).

        Returns once the cell has no calls in flight and no executions. With no other active cell the
        executions are unplaced and their calls wait (bounded) for a cell like any new execution.
        """
        start = time.perf_counter()
        cell = self._cell(cell_id)
        destination = self._cell(target) if target is not None else None
        if destination is cell:
            raise ValueError(f"cannot drain cell {cell_id!r} into itself")
        if destination is not None and destination.draining:
            raise ValueError(f"target cell {target!r} is draining itself")
        cell.draining = True
        report = DrainReport(cell_id)
        moves = []
        for execution_id in sorted(cell.executions):
            dest = destination or self._least_loaded(exclude=cell)
            self._repoint(execution_id, dest)
            moves.append(self._move(execution_id, cell, dest, report, abort_retry_s))
        report.moved_executions = len(moves)
        await asyncio.gather(*moves)
        while cell.attempts:  # calls of executions that were already leaving: let them finish
            await asyncio.wait([asyncio.ensure_future(a.done.wait()) for a in list(cell.attempts)])
        report.seconds = time.perf_counter() - start
        self._notify()
        return report

    def _least_loaded(self, exclude: RoutedCell) -> RoutedCell | None:
        active = [c for c in self.cells.values() if c is not exclude and not c.draining]
        return min(active, key=lambda c: (c.inflight + len(c.executions), c.cell_id)) if active else None

    async def _move(self, execution_id: str, source: RoutedCell, dest: RoutedCell | None, report: DrainReport, retry_s: float) -> None:
        moving = self._moving[execution_id]
        retry_prompts: dict[str, list[int]] = {}
        asked: list[_Attempt] = []
        try:
            while True:
                mine = [a for a in source.attempts if a.execution_id == execution_id]
                if not mine:
                    break
                for attempt in mine:
                    if not attempt.moved:
                        asked.append(attempt)
                    attempt.moved = True
                    retry_prompts[attempt.session_id] = attempt.prompt_ids
                try:
                    for session_id in {a.session_id for a in mine}:
                        await source.engine.abort(session_id)
                except CellLostError:
                    pass  # the calls fail with it and are retried on their new cell all the same
                await asyncio.wait([asyncio.ensure_future(a.done.wait()) for a in mine], timeout=retry_s)
            # An attempt leaves ``source.attempts`` and is marked interrupted in the same step of its call
            # (no await between), so every asked attempt has settled here.
            report.aborted_calls += sum(attempt.interrupted for attempt in asked)
            if dest is None:
                return
            for session_id in sorted(self._sessions.get(execution_id, ())):
                try:
                    state = await source.engine.export_session(session_id)
                except CellLostError:
                    state = None  # recomputed on the new cell
                if state is not None and session_id in retry_prompts:
                    state = truncate_state(state, common_prefix_length(state.tokens, retry_prompts[session_id]))
                if state is None or not state.tokens:
                    report.kv_missing += 1
                    continue
                await dest.engine.import_session(session_id, state)
                report.kv_imports += 1
                self.counters["kv_imports"] += 1
                if self.parking.enabled and session_id not in retry_prompts:  # idle: off the new cell's budget
                    report.parked += await self._park(dest, session_id)
        finally:
            del self._moving[execution_id]
            moving.set()
            self._notify()


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def truncate_state(state: KVState, length: int) -> KVState:
    """The cache of the first ``length`` tokens. An aborted call leaves its session's cache covering the
    prompt plus the partial response; the retry sends the same prompt, and an imported cache is only
    adopted if it is a prefix of the next prompt, so the partial response's part is cut off."""
    if length >= len(state.tokens):
        return state
    tensors = [(key[:, :length], value[:, :length]) for key, value in state.tensors]
    return KVState(list(state.tokens[:length]), state.weight_version, tensors, dict(state.meta))
