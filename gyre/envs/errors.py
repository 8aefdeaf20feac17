"""Errors of the envs room.

Three kinds, because their callers react differently:

- `TaskFormatError`: a task file is broken. Loaders collect these and go on with the other tasks.
- `EvaluationError`: the evaluation itself failed (the test command crashed, timed out, or could not be
  set up), as opposed to "the tests ran and failed". The harness retries these (`env.eval_retries`) and
  then marks the execution unscorable instead of training on a wrong reward.
- `SandboxError`: the sandbox could not be built or started (bad configuration, bwrap refused to run).
"""

from __future__ import annotations

from pathlib import Path


class TaskFormatError(ValueError):
    """A task file that cannot be read: names the file and the field at fault."""

    def __init__(self, path: str | Path, field: str, message: str) -> None:
        self.path = str(path)
        self.field = field
        self.message = message
        super().__init__(f"{self.path}: field {field!r}: {message}")


class EvaluationError(RuntimeError):
    """Scoring could not produce a trustworthy result (distinct from a low score).

    ``reason`` is one of ``"timeout"`` (the test command ran past its limit), ``"crash"`` (the test
    runner never produced results: missing interpreter, sandbox failure, killed by a limit) or
    ``"setup"`` (hidden tests could not be installed). A harness may choose to treat a persistent
    ``"timeout"`` as reward 0 (an agent that makes the tests hang) rather than as unscorable.
    """

    REASONS = ("timeout", "crash", "setup")

    def __init__(self, task_id: str, reason: str, message: str, log_tail: str = "") -> None:
        if reason not in self.REASONS:
            raise ValueError(f"EvaluationError reason must be one of {self.REASONS}, got {reason!r}")
        self.task_id = task_id
        self.reason = reason
        self.message = message
        self.log_tail = log_tail
        super().__init__(f"task {task_id!r}: evaluation {reason}: {message}")


class SandboxError(RuntimeError):
    """The sandbox could not run a command at all (configuration or isolation failure)."""
