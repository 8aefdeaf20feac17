"""What every scorer shares: running the test command (guarded: `gyre.envs.scorers.guard`), telling
"could not evaluate" from "failed", and applying a patch inside the sandbox.

The line between `EvaluationError` and a low `Score` (kept simple on purpose, so it is predictable):

- `EvaluationError` ("timeout"): the test command ran past the task's test timeout.
- `EvaluationError` ("crash"): the sandbox could not run it, or the runner itself is missing (exit 126 or
  127 with no result parsed).
- `EvaluationError` ("setup"): hidden tests could not be installed (a test patch that does not apply).
- Everything else is a score, 0 when nothing passed: broken code that makes pytest error out, a
  conftest the agent broke, a fork bomb stopped by the limits. Those are the agent's doing and must be
  trained on, not retried.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from gyre.envs.errors import EvaluationError, SandboxError
from gyre.envs.sandbox import Mount, Sandbox, SandboxResult
from gyre.envs.scorers.guard import GuardedRun, TestReport

if TYPE_CHECKING:
    from gyre.envs.task import Task

LOG_TAIL_CHARS = 4000


def run_tests(
    task: Task,
    sandbox: Sandbox,
    command: str,
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
    mounts: Sequence[Mount] = (),
    timeout: float | None = None,
    pass_fds: Sequence[int] = (),
) -> SandboxResult:
    """Run one test command under the task's test timeout; raise `EvaluationError` on timeout or
    when the sandbox cannot run it."""
    limit = task.test_timeout if timeout is None else timeout
    try:
        result = sandbox.run(
            command, workspace, timeout=limit, env=env, mounts=mounts, workdir=task.workdir, pass_fds=pass_fds
        )
    except SandboxError as exc:
        raise EvaluationError(task.id, "crash", f"sandbox could not run the tests: {exc}") from exc
    if result.timed_out:
        raise EvaluationError(
            task.id, "timeout", f"test command ran past {limit:.0f}s: {command[:200]}", result.tail(LOG_TAIL_CHARS)
        )
    return result


def run_guarded_tests(
    task: Task,
    sandbox: Sandbox,
    command: str,
    workspace: Path,
    *,
    env: Mapping[str, str] | None = None,
    mounts: Sequence[Mount] = (),
    timeout: float | None = None,
) -> tuple[SandboxResult, TestReport]:
    """`run_tests` with pytest guarded (`gyre.envs.scorers.guard`): returns the command's result and what
    its pytest runs reported, which is all a scorer may grade from."""
    with GuardedRun(sandbox) as guard:
        result = run_tests(
            task, sandbox, command, workspace, env=guard.env(dict(env or {})), mounts=[*mounts, *guard.mounts()],
            timeout=timeout, pass_fds=guard.pass_fds(),
        )
        return result, guard.read()


def runner_missing(result: SandboxResult) -> bool:
    """Exit 126/127: the shell could not find or execute the test runner."""
    return result.returncode in (126, 127)


def apply_patch(
    task: Task, workspace: Path, patch: str, sandbox: Sandbox, *, what: str, timeout: float = 120.0
) -> SandboxResult:
    """Apply a unified diff in the workspace, inside the sandbox (the workspace's git config is the
    agent's, so git never runs on it outside the sandbox). Tries ``git apply`` then ``patch -p1``.

    Raises `EvaluationError` ("setup") when neither applies.
    """
    staging = Path(tempfile.mkdtemp(prefix="gyre-patch-"))
    staging.chmod(0o755)  # read by the sandbox's unprivileged user
    try:
        (staging / "change.diff").write_text(patch if patch.endswith("\n") else patch + "\n")
        mount = Mount(str(staging), "/gyre_patch")
        launch_path = f"{sandbox.visible_path(mount)}/change.diff"
        command = (
            f"git -c core.hooksPath=/dev/null apply --verbose {launch_path} "
            f"|| patch --batch --fuzz=5 -p1 -i {launch_path}"
        )
        try:
            result = sandbox.run(command, workspace, timeout=timeout, mounts=[mount], workdir=task.workdir)
        except SandboxError as exc:
            raise EvaluationError(task.id, "setup", f"cannot apply the {what}: {exc}") from exc
        if result.returncode != 0 or result.timed_out:
            raise EvaluationError(task.id, "setup", f"the {what} does not apply", result.tail(LOG_TAIL_CHARS))
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def stage_folder(source: Path | None, extra: Mapping[str, Path] | None = None) -> Path:
    """Copy a task's hidden folder (and extra files) into a fresh temp folder the test run may write."""
    staging = Path(tempfile.mkdtemp(prefix="gyre-tests-"))
    if source is not None and source.is_dir():
        shutil.copytree(source, staging, dirs_exist_ok=True, symlinks=True)
    for name, path in (extra or {}).items():
        shutil.copy2(path, staging / name)
    readable_by_all(staging)
    return staging


def readable_by_all(folder: Path) -> None:
    """Folders 0755 and files 0644 (executables 0755): a staged copy the sandbox's user reads but cannot
    change (it stays root's)."""
    folder.chmod(0o755)
    for path in folder.rglob("*"):
        if path.is_symlink():
            continue
        if path.is_dir():
            path.chmod(0o755)
        else:
            path.chmod(0o755 if path.stat().st_mode & 0o111 else 0o644)
