"""Scheduling policies (pure: no clock, no I/O) shared by the driver and the simulator."""

from gyre.scheduler.policies import POLICIES, AsyncPolicy, ColocatePolicy, ElasticPolicy, Policy, make_policy
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

__all__ = [
    "POLICIES", "Action", "AsyncPolicy", "CellView", "ColocatePolicy", "Dispatch", "ElasticPolicy", "Policy",
    "Role", "SchedulerConfig", "SchedulerState", "StartTrainStep", "SwitchCell", "make_policy",
]
