from __future__ import annotations

import pytest

from gyre.cells.roles import RoleError, RoleMachine
from gyre.scheduler.state import Role


def test_role_transitions_and_time_accounting():
    now = [0.0]
    machine = RoleMachine("c0", clock=lambda: now[0])
    machine.begin(Role.ROLLOUT)
    now[0] = 1.0
    machine.finish()
    now[0] = 5.0
    machine.begin(Role.TRAIN)
    with pytest.raises(RoleError, match="already switching to train"):
        machine.begin(Role.ROLLOUT)
    now[0] = 6.0
    assert machine.finish() == Role.TRAIN
    now[0] = 10.0
    assert machine.seconds_in_roles() == {"idle": 0.0, "switching": 2.0, "rollout": 4.0, "train": 4.0}
    with pytest.raises(RoleError, match="cannot switch from train to train"):
        machine.begin(Role.TRAIN)
    machine.fail()
    with pytest.raises(RoleError, match="dead"):
        machine.begin(Role.ROLLOUT)
