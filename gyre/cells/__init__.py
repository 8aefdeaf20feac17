"""Cells: groups of rank actors that each hold an engine (rank 0) and a shard of a training replica. Which
role a cell is in lives in the cluster's membership record (``gyre.single_controller.Membership``)."""

from gyre.cells.cell import Cell
from gyre.cells.config import CellConfig

__all__ = ["Cell", "CellConfig"]
