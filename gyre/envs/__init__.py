"""Tasks, loaders, workspaces, the sandbox and scorers for the swe, nl2repo and terminal domains.

Typical use (what the harness does around an agent run)::

    from gyre.envs import Sandbox, load_tasks

    result = load_tasks("swe", "recipes/deepswe/tasks")   # result.errors lists broken tasks
    sandbox = Sandbox()                                    # bwrap when available, else process
    task = result.tasks[0]
    workspace = task.materialise("/tmp/run-1/workspace")
    ...                                                    # the agent works in `workspace`
    score = task.score(workspace, sandbox)                 # hidden tests copied in only now

This package must not import torch: it runs processes and scores workspaces.
"""

from gyre.envs.errors import EvaluationError, SandboxError, TaskFormatError
from gyre.envs.loaders import LoadResult, load_tasks
from gyre.envs.sandbox import Mount, Sandbox, SandboxResult
from gyre.envs.task import DOMAINS, Score, Task

__all__ = [
    "DOMAINS",
    "EvaluationError",
    "LoadResult",
    "Mount",
    "Sandbox",
    "SandboxError",
    "SandboxResult",
    "Score",
    "Task",
    "TaskFormatError",
    "load_tasks",
]
