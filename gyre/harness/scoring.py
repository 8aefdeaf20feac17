"""Scoring an execution's preserved workspace, with the retry rule for evaluations that fail.

Three outcomes, because training must treat them differently:

- a `Score` (any reward, 0 included): the tests ran; this is the reward, whatever the harness status was
  (a timed-out or crashed execution is scored on what it left: partial scoring);
- *nothing to evaluate* (the workspace is gone): reward 0, still trained on. It is the run's own
  doing (the agent deleted its workspace), as an empty patch is an unresolved task in SWE-bench;
- *unscorable*: the evaluation itself failed (`EvaluationError`: the test command crashed or could not
  be set up) on every one of ``1 + retries`` attempts. The reward is unknown, so the execution is left
  out of training (``scorable=False``) rather than trained on a made-up 0.

One exception to the last rule, on by default (``hung_tests_score_zero``): tests that run past the task's
test timeout on *every* attempt score 0. Hanging tests are almost always the agent's code looping, and
leaving those out would teach the policy that hanging is safer than failing.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gyre.envs import EvaluationError

if TYPE_CHECKING:
    from gyre.envs import Sandbox, Task

log = logging.getLogger(__name__)


@dataclass
class ScoreOutcome:
    scorable: bool
    reward: float
    passed: int = 0
    total: int = 0
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    log_tail: str = ""
    note: str = ""  # "nothing_to_evaluate" | "hung_tests" | "unscorable" | ""

    @property
    def fraction(self) -> float:
        """Tests passed over tests counted: the partial score shown by the eval report."""
        return self.passed / self.total if self.total else 0.0


def score_workspace(task: Task, workspace: Path, sandbox: Sandbox, *, retries: int, hung_tests_score_zero: bool = True) -> ScoreOutcome:
    """Install the hidden tests and score ``workspace`` (blocking: run it in a worker thread)."""
    if not workspace.is_dir():
        return ScoreOutcome(True, 0.0, note="nothing_to_evaluate", detail={"reason": f"workspace {workspace} is missing"})
    errors: list[str] = []
    reasons: list[str] = []
    for attempt in range(1, retries + 2):
        try:
            score = task.score(workspace, sandbox)
        except EvaluationError as error:
            errors.append(f"attempt {attempt}: {error}")
            reasons.append(error.reason)
            continue
        except Exception as error:  # a scorer bug must not take the whole pool down; it is unscorable
            log.exception("task %s: scoring raised %s", task.id, type(error).__name__)
            errors.append(f"attempt {attempt}: {type(error).__name__}: {error}")
            reasons.append("error")
            continue
        return ScoreOutcome(
            True, score.reward, score.passed, score.total, attempt, errors, score.detail, score.log_tail
        )
    if hung_tests_score_zero and reasons and all(reason == "timeout" for reason in reasons):
        return ScoreOutcome(True, 0.0, attempts=len(reasons), errors=errors, note="hung_tests")
    log.warning("task %s: evaluation failed %d times; the execution is unscorable: %s", task.id, len(errors), errors[-1])
    return ScoreOutcome(False, 0.0, attempts=len(reasons), errors=errors, note="unscorable")
