"""Scheduling policies (no clock, no I/O; async and elastic remember some of their own decisions: see
``gyre.scheduler.policies``) shared by the driver and the simulator, and the park rule
shared by the router and the simulator."""

from gyre.scheduler.parking import ParkRule
from gyre.scheduler.policies import (
    POLICIES,
    AsyncPolicy,
    ColocatePolicy,
    ElasticPolicy,
    Policy,
    make_policy,
)
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
    VersionCounts,
    version_counts,
)

__all__ = [
    "POLICIES", "AbortStale", "Action", "AsyncPolicy", "CellView", "ColocatePolicy", "Dispatch", "ElasticPolicy", "ParkRule",
    "Policy",
    "Role", "SchedulerConfig", "SchedulerState", "StartTrainStep", "SwitchCell", "VersionCounts", "make_policy",
    "version_counts",
]
