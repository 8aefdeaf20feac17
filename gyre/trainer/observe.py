"""What the scheduling policy sees of a live run, and how the driver applies what it decides.

``scheduler_state`` builds one ``SchedulerState`` from the cluster and the execution buffer, with what the
policy has no clock to measure (the running step's remaining compute, a switch's duration, the rate at which
executions become ready).
``group_actions`` splits one decision into the role switches, applied by the cluster as one concurrent bulk,
and the other actions in the order the policy issued them. The simulator (``gyre/sim/engine.py``) builds the
same state from its own world and applies the same actions.
"""

from __future__ import annotations

from typing import Any

from gyre.scheduler import Action, Role, SchedulerState, SwitchCell
from gyre.trainer.buffer import ExecutionBuffer


def scheduler_state(cluster: Any, buffer: ExecutionBuffer, training: bool, steps_done: int,
                    total_steps: int, step_waiting: int = 0, batch_size: int = 1) -> SchedulerState:
    """Cells the driver has asked to switch show as SWITCHING, with their target, from the moment the switch
    is asked for (as in the simulator): the cluster's membership record holds the planned moves.

    Parking: a cluster whose router parks sessions waiting on tools reports ``parking() -> (slot_share,
    parked)`` and each cell's ``CellView.active`` (the real ``Cluster``: from the router's ``occupancy``); one
    that does not shows every session holding its slot (share 1, none parked)."""
    parking = getattr(cluster, "parking", None)
    slot_share, parked = parking() if parking is not None else (1.0, 0)
    return SchedulerState(
        cells=cluster.views(),
        policy_version=cluster.version,
        running=buffer.running,
        ready=buffer.ready_count,
        ready_versions=buffer.ready_versions(),
        running_versions=buffer.running_versions(),
        training=training,
        steps_done=steps_done,
        total_steps=total_steps,
        train_left_s=cluster.train_left_s(step_waiting / batch_size),
        join_s=cluster.join_s(),
        return_s=cluster.return_s(),
        ready_rate=buffer.ready_rate.rate() if buffer.ready_rate is not None else None,
        step_waiting=step_waiting,
        slot_share=slot_share,
        parked=parked,
    )


def group_actions(actions: list[Action]) -> tuple[dict[str, Role], list[Action]]:
    """(every cell's switch, the other actions in order). A cell named twice keeps its last target."""
    switches = {a.cell_id: a.to for a in actions if isinstance(a, SwitchCell)}
    return switches, [a for a in actions if not isinstance(a, SwitchCell)]
