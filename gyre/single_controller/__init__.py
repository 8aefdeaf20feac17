"""The single controller: worker groups whose methods declare how a group call is dispatched and collected,
over a membership record every view derives from. Knows nothing about RL."""

from gyre.single_controller.dispatch import Collect, DispatchMode, register, split_evenly
from gyre.single_controller.membership import Membership, MembershipError
from gyre.single_controller.stream import StreamCall
from gyre.single_controller.worker_group import GroupCall, WorkerGroup

__all__ = ["Collect", "DispatchMode", "GroupCall", "Membership", "MembershipError", "StreamCall", "WorkerGroup",
           "register", "split_evenly"]
