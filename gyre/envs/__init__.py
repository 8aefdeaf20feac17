"""Tasks, loaders, workspaces, the sandbox and scorers for the swe, nl2repo and terminal domains.

What a harness does around one agent run::

    from gyre.envs import EnvConfig, EvaluationError

    env = EnvConfig.from_config(cfg.env)                   # conf/env/<suite>.yaml
    tasks = env.load()                                     # tasks.errors lists broken tasks (skipped)
    task = tasks.tasks[0]
    workspace = task.materialise("/runs/x/workspace")      # starting files only, no hidden tests
    launch = env.sandbox.prepare(agent_cmd, workspace, workdir=task.workdir, forward=Forward(sock, host, port))
    ...                                                    # spawn launch.argv (env=launch.env,
                                                           # cwd=launch.cwd, start_new_session=True,
                                                           # pass_fds=launch.pass_fds),
                                                           # launch.attach(pid); on the time limit
                                                           # launch.kill(); when reaped launch.exited();
                                                           # finally launch.close()
    try:
        score = task.score(workspace, env.sandbox)         # hidden tests copied in only now
    except EvaluationError as exc:                         # the evaluation itself failed:
        ...                                                # retry up to env.eval_retries (exc.reason)

``task.apply_solution(workspace, sandbox)`` applies the reference solution (an oracle harness).
``task.workdir`` is where the workspace must appear inside bwrap (``/app`` for Terminal-Bench); a
harness process that must reach the proxy passes a `Forward` (the proxy's address and the host Unix
socket that reaches it: `gyre.harness.gate`), and the Gyre source folder in ``Sandbox.ro_paths`` if it
runs ``python -m gyre...`` inside.

This package must not import torch: it runs processes and scores workspaces.
"""

from gyre.envs.config import EnvConfig
from gyre.envs.errors import EvaluationError, SandboxError, TaskFormatError
from gyre.envs.loaders import LoadResult, load_tasks
from gyre.envs.sandbox import Forward, Launch, Mount, Sandbox, SandboxResult
from gyre.envs.task import DOMAINS, Score, Task

__all__ = [
    "DOMAINS",
    "EnvConfig",
    "EvaluationError",
    "Forward",
    "Launch",
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
