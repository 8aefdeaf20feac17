"""Reference solutions, one kind per way the public formats ship them.

- `PatchSolution`: SWE-bench's gold ``patch``, applied inside the sandbox.
- `CopySolution`: a reference implementation folder copied over the workspace (our NL2Repo suites keep
  it under ``reference/`` in the task folder, never shown to the agent).
- `ScriptSolution`: Terminal-Bench's ``solution.sh`` / Harbor's ``solution/solve.sh``, run in the
  sandbox from the workspace, its folder shown at ``/solution`` (bwrap) as Harbor does.

The oracle harness and the suite tests apply these to prove the tasks are solvable as scored.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gyre.envs.sandbox import Mount, Sandbox
from gyre.envs.scorers.base import LOG_TAIL_CHARS, apply_patch, stage_folder
from gyre.envs.workspace import place_tree

if TYPE_CHECKING:
    from gyre.envs.task import Task


class SolutionError(RuntimeError):
    """A reference solution failed to apply: the task itself is broken."""


@dataclass(frozen=True)
class PatchSolution:
    patch: str

    def apply(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        apply_patch(task, workspace, self.patch, sandbox, what="reference patch")


@dataclass(frozen=True)
class CopySolution:
    folder: str

    def apply(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        root = Path(self.folder)
        for child in sorted(root.iterdir()):
            place_tree(workspace, child.name, child)


@dataclass(frozen=True)
class ScriptSolution:
    """Run the bash script ``script`` (host path). With ``folder``, that whole folder (Harbor's
    ``solution/``) is staged next to it; else the script alone. Shown at ``target`` under bwrap."""

    script: str
    folder: str | None = None
    target: str = "/solution"
    env: dict[str, str] = field(default_factory=dict)

    def apply(self, task: Task, workspace: Path, sandbox: Sandbox) -> None:
        script = Path(self.script)
        if self.folder is not None:
            staging = stage_folder(Path(self.folder))
            name = str(script.relative_to(self.folder))
        else:
            staging = stage_folder(None, {script.name: script})
            name = script.name
        try:
            mount = Mount(str(staging), self.target, writable=True)
            inner = sandbox.visible_path(mount)
            result = sandbox.run(
                f"bash {inner}/{name}",
                workspace,
                timeout=task.agent_timeout,
                env=self.env,
                mounts=[mount],
                workdir=task.workdir,
            )
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        if result.returncode != 0 or result.timed_out:
            raise SolutionError(
                f"task {task.id!r}: reference solution {script.name} failed (exit {result.returncode}, "
                f"timed_out={result.timed_out}):\n{result.tail(LOG_TAIL_CHARS)}"
            )
