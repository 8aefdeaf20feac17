"""Gyre: online RL for long-horizon LLM agents with elastic cells and tree-packed training."""

__version__ = "0.1.0"
