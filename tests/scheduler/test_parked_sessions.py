"""Policies with parked sessions: a cell serves its slots over the share of time a session holds one, and a
cell holding only parked sessions is free."""

from __future__ import annotations

import dataclasses

import pytest

from gyre.scheduler import (
    CellView,
    Dispatch,
    Role,
    SchedulerConfig,
    SchedulerState,
    SwitchCell,
    make_policy,
)

R, T = Role.ROLLOUT, Role.TRAIN


def cells(*roles: Role, active: tuple[int | None, ...] | None = None) -> tuple[CellView, ...]:
    active = active or (None,) * len(roles)
    return tuple(CellView(f"c{i}", role, is_core=i == 0, capacity=4, active=a)
                 for i, (role, a) in enumerate(zip(roles, active)))


def policy(name: str, **kw):
    return make_policy(SchedulerConfig(name=name, batch_size=8, **kw))


def joined(actions) -> set[str]:
    return {a.cell_id for a in actions if isinstance(a, SwitchCell) and a.to == T}


def test_a_cell_serves_its_slots_over_the_slot_share():
    state = SchedulerState(cells=cells(R, R, R, R), policy_version=0, running=0, ready=0, slot_share=4 / 7)
    assert state.hosted_capacity(state.cells[1]) == 7  # 4 / (4 / 7) stays 7 in floating point
    assert state.capacity_of(R) == 28
    assert SchedulerState(cells=cells(R, R), policy_version=0, running=0, ready=0).capacity_of(R) == 8
    for bad in (0.0, 1.5):
        with pytest.raises(ValueError, match="slot_share must be in"):
            SchedulerState(cells=cells(R, R), policy_version=0, running=0, ready=0, slot_share=bad)


def test_async_fills_its_rollout_cells_up_to_their_hosted_capacity():
    """Two rollout cells of 4 slots: 8 executions without parking, 12 when a session holds a slot half its
    time (the look-ahead allows 16)."""
    p = policy("async", rollout_cells=2, max_staleness=1)
    base = SchedulerState(cells=cells(T, R, R, T), policy_version=0, running=0, ready=0)
    assert p.decide(base) == [Dispatch(8)]
    assert p.decide(dataclasses.replace(base, slot_share=0.5)) == [Dispatch(16)]
    assert p.decide(dataclasses.replace(base, slot_share=0.75)) == [Dispatch(10)]  # 5 per cell (4 / 0.75, down)


def test_elastic_trains_on_the_cells_parking_frees_during_a_step():
    """A batch is ready and 8 executions still run on four cells of 4 slots: without parking two satellites
    must keep serving them and one joins the core; when a session holds a slot a quarter of its time one
    satellite serves all 8 and the other two join."""
    p = policy("elastic", max_staleness=1)
    ready = {"policy_version": 0, "running": 8, "ready": 8, "total_steps": 10}
    assert joined(p.decide(SchedulerState(cells=cells(R, R, R, R), **ready))) == {"c0", "c3"}
    p = policy("elastic", max_staleness=1)
    assert joined(p.decide(SchedulerState(cells=cells(R, R, R, R), slot_share=0.25, **ready))) == {"c0", "c2", "c3"}


def test_elastic_sends_free_cells_first():
    """A cell holding only parked sessions (``active`` 0) moves nothing when it leaves: of the satellites
    rollout can spare, it goes first, ahead of the last-first order."""
    p = policy("elastic", max_staleness=1)
    state = SchedulerState(cells=cells(R, R, R, R, active=(2, 0, 3, 3)), policy_version=0, running=8, ready=8,
                           total_steps=10, slot_share=0.5)
    assert state.cells[1].free and not state.cells[3].free and not cells(R)[0].free  # unobserved: not free
    assert joined(p.decide(state)) == {"c0", "c1", "c3"}  # hosted 8 per cell: one satellite serves the 8
    p = policy("elastic", max_staleness=1)
    assert joined(p.decide(dataclasses.replace(state, cells=cells(R, R, R, R, active=(2, 3, 3, 3))))) == {"c0", "c2", "c3"}


def test_colocate_still_trains_only_once_its_batch_is_done():
    """Parked sessions are still running executions of colocate's batch: it waits for them."""
    p = policy("colocate")
    state = SchedulerState(cells=cells(R, R, R, R, active=(0, 0, 0, 0)), policy_version=0, running=3, ready=5,
                           slot_share=0.25, parked=3)
    assert p.decide(state) == []
