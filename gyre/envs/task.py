"""The one `Task` type every domain loads into, and the `Score` a scorer returns.

A task is data plus three small strategy objects, so the harness can drive any domain the same way:

1. ``task.materialise(folder)``: the starting workspace (a repo at its base commit, an empty folder, the
   files a Terminal-Bench Dockerfile copies in);
2. the agent works in that folder (the harness's business);
3. ``task.score(folder, sandbox)``: hidden tests are copied in only now (so the agent never saw them),
   sealed against the code under test (root's, in sticky folders: `gyre.envs.ownership.seal`), run
   inside the sandbox, and turned into a `Score`. A failure of the evaluation itself raises
   `EvaluationError` instead of returning a low score.

``task.apply_solution(folder, sandbox)`` applies the reference solution (the oracle harness and the
suite tests use it to prove that tasks, sandbox and scorers agree).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from gyre.envs.sandbox import Sandbox

Domain = Literal["swe", "nl2repo", "terminal"]
DOMAINS: tuple[str, ...] = ("swe", "nl2repo", "terminal")


@dataclass
class Score:
    """Outcome of one evaluation.

    ``reward`` is what training uses and follows the benchmark's own rule (binary for SWE and
    Terminal-Bench, a fraction for NL2RepoBench). ``passed``/``total`` count tests and give the partial
    credit the eval report shows even where the reward is binary. ``detail`` holds per-test statuses
    and domain facts; ``log_tail`` the end of the test output, for humans.
    """

    reward: float
    passed: int
    total: int
    detail: dict[str, Any] = field(default_factory=dict)
    log_tail: str = ""

    def __post_init__(self) -> None:
        if not 0.0 <= self.reward <= 1.0:
            raise ValueError(f"Score.reward must be in [0, 1], got {self.reward}")
        if self.passed < 0 or self.total < 0:
            raise ValueError(f"Score counts must be >= 0, got passed={self.passed} total={self.total}")

    @property
    def resolved(self) -> bool:
        """Full credit: the benchmark would count this task as solved."""
        return self.reward >= 1.0

    @property
    def fraction(self) -> float:
        """Tests passed over tests counted (0 when nothing was counted)."""
        return self.passed / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class WorkspaceSource(Protocol):
    """Writes a task's starting files into an empty folder."""

    def materialise(self, dest: Path) -> None: ...

    def describe(self) -> str: ...


class Scorer(Protocol):
    """Installs hidden tests into a workspace and scores it inside a sandbox."""

    def install_tests(self, task: Task, workspace: Path, sandbox: Sandbox) -> None: ...

    def sealed_paths(self) -> list[str]:
        """Workspace-relative paths of the hidden tests it installs (sealed while they run)."""
        ...

    def run(self, task: Task, workspace: Path, sandbox: Sandbox) -> Score: ...


class Solution(Protocol):
    """The reference solution: turns a fresh workspace into one that scores 1.0."""

    def apply(self, task: Task, workspace: Path, sandbox: Sandbox) -> None: ...


@dataclass
class Task:
    """One task of any domain.

    ``workdir`` is where the workspace should appear inside a bwrap sandbox (``/app`` for
    Terminal-Bench, whose tests use absolute paths); ``None`` keeps the host path. The process sandbox
    always uses the host path. ``origin`` is the file or folder the task was loaded from.
    """

    id: str
    domain: str
    instruction: str
    source: WorkspaceSource
    scorer: Scorer
    agent_timeout: float
    test_timeout: float
    solution: Solution | None = None
    origin: str = ""
    workdir: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.domain not in DOMAINS:
            raise ValueError(f"Task {self.id!r}: domain must be one of {DOMAINS}, got {self.domain!r}")
        if not self.id:
            raise ValueError("Task id must be non-empty")
        for name in ("agent_timeout", "test_timeout"):
            if getattr(self, name) <= 0:
                raise ValueError(f"Task {self.id!r}: {name} must be > 0, got {getattr(self, name)}")

    def materialise(self, dest: str | Path) -> Path:
        """Create the starting workspace in ``dest`` (absent or empty) and return its absolute path."""
        dest = Path(dest).absolute()
        if dest.exists() and any(dest.iterdir()):
            raise FileExistsError(f"task {self.id!r}: workspace folder {dest} is not empty")
        dest.mkdir(parents=True, exist_ok=True)
        self.source.materialise(dest)
        return dest

    def install_tests(self, workspace: str | Path, sandbox: Sandbox) -> None:
        """Copy the hidden tests in (call only after the agent stopped) and seal them when sandboxed
        commands run as another user (`Sandbox.runs_as`). Idempotent."""
        from gyre.envs import ownership

        ws = Path(workspace).absolute()
        owner = sandbox.runs_as()
        if owner is not None:
            ownership.unseal(ws, *owner)  # a retry: the scorer may change the tests' folders again
        self.scorer.install_tests(self, ws, sandbox)
        if owner is not None:
            ownership.seal(ws, self.scorer.sealed_paths())

    def score(self, workspace: str | Path, sandbox: Sandbox, *, install: bool = True) -> Score:
        """Install the hidden tests (unless ``install=False``) and score the workspace."""
        ws = Path(workspace).absolute()
        if not ws.is_dir():
            raise FileNotFoundError(f"task {self.id!r}: workspace {ws} does not exist")
        if install:
            self.install_tests(ws, sandbox)
        return self.scorer.run(self, ws, sandbox)

    def apply_solution(self, workspace: str | Path, sandbox: Sandbox) -> None:
        """Apply the reference solution to a materialised workspace."""
        if self.solution is None:
            raise ValueError(f"task {self.id!r} ({self.origin}) has no reference solution")
        self.solution.apply(self, Path(workspace).absolute(), sandbox)

    def describe(self) -> str:
        return f"{self.domain}:{self.id} from {os.path.basename(self.origin) or '?'} ({self.source.describe()})"
