"""Scorers: one per benchmark rule. Each installs its hidden tests, runs them in the sandbox and
returns a `gyre.envs.task.Score`, or raises `gyre.envs.errors.EvaluationError` when the evaluation
itself could not run. Scorers hold only immutable task data, so one task can be scored for many
samples at once."""

from gyre.envs.scorers.nl2repo import NL2RepoScorer
from gyre.envs.scorers.swe import R2EScorer, SweScorer
from gyre.envs.scorers.terminal import HarborScorer, TerminalBenchScorer

__all__ = ["HarborScorer", "NL2RepoScorer", "R2EScorer", "SweScorer", "TerminalBenchScorer"]
