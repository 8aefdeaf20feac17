"""Cells: groups of rank actors that each hold an engine (rank 0) and a shard of a training replica, and the
role state machine the driver switches them through."""

from gyre.cells.cell import Cell
from gyre.cells.config import CellConfig
from gyre.cells.roles import RoleError, RoleMachine

__all__ = ["Cell", "CellConfig", "RoleError", "RoleMachine"]
