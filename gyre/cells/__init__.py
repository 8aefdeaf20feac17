"""Cells: the role state machine and the Ray actor hosting an engine and a training replica."""

from gyre.cells.cell import Cell, CellConfig
from gyre.cells.roles import RoleError, RoleMachine

__all__ = ["Cell", "CellConfig", "RoleError", "RoleMachine"]
