"""`ExecutionPool`: many executions at once (asyncio + subprocesses), each reported as an `Execution`.

Two ways to use it, on one event loop:

- a training driver submits executions one at a time as rollout capacity allows and awaits each on its
  own: ``future = pool.submit(task, group, sample_index)``, then ``execution = await future``;
- an evaluation runs a whole batch: ``executions = await pool.run(tasks, samples=k)``.

``concurrency`` bounds executions in their harness phase (materialise + agent run: what loads the
rollout engines); ``score_concurrency`` bounds test runs separately, since scoring is CPU work on this
machine while agent runs mostly wait on the model. Progress (rich) shows done/total, running, timeouts,
crashes, unscorable executions and the mean reward so far.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from gyre.harness.execution import ExecutionRequest, ExecutionRunner, is_scorable
from gyre.protocol import Execution

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

    from gyre.envs import Task

log = logging.getLogger(__name__)


class PoolProgress:
    """A rich progress bar with the pool's running counts (or nothing, when disabled)."""

    def __init__(self, enabled: bool, label: str) -> None:
        self.enabled = enabled
        self.label = label
        self.total = self.done = self.running = 0
        self.timeouts = self.crashes = self.unscorable = 0
        self.reward_sum = 0.0
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def _ensure(self) -> None:
        if not self.enabled or self._progress is not None:
            return
        from rich.progress import (  # only when progress is shown
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from gyre.progress import progress_columns, progress_console

        console = progress_console()
        columns = progress_columns(console, TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                   TimeElapsedColumn(), TextColumn("{task.fields[status]}"))
        self._progress = Progress(*columns, console=console)
        self._progress.start()
        self._task = self._progress.add_task(self.label, total=0, status="")

    def submitted(self) -> None:
        self.total += 1
        self._refresh()

    def started(self) -> None:
        self.running += 1
        self._refresh()

    def finished(self, execution: Execution | None, began: bool = True) -> None:
        self.running -= began
        self.done += 1
        if execution is not None:
            self.timeouts += execution.status == "timeout"
            self.crashes += execution.status == "crashed"
            if is_scorable(execution):
                self.reward_sum += execution.reward
            else:
                self.unscorable += 1
        self._refresh()

    def _refresh(self) -> None:
        self._ensure()
        if self._progress is None or self._task is None:
            return
        scored = self.done - self.unscorable
        mean = f"{self.reward_sum / scored:.3f}" if scored else "-"
        status = (
            f"running {self.running}  timeouts {self.timeouts}  crashes {self.crashes}  "
            f"unscorable {self.unscorable}  mean reward {mean}"
        )
        self._progress.update(self._task, total=self.total, completed=self.done, status=status)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


class Pool:
    """What every pool shares (`ExecutionPool` here, `gyre.harness.nodes.NodePool` over several nodes):
    ``run`` over ``submit``, cancelling what is pending, the progress display, ``async with``."""

    progress: PoolProgress

    def __init__(self) -> None:
        self._pending: set[asyncio.Future[Execution]] = set()

    def submit(self, task: Task, group: str | None = None, sample_index: int = 0, **overrides: Any) -> asyncio.Future[Execution]:
        raise NotImplementedError

    def _track(self, future: asyncio.Future[Execution]) -> asyncio.Future[Execution]:
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)
        return future

    async def run(self, tasks: Sequence[Task], samples: int = 1) -> list[Execution]:
        """Every task ``samples`` times (group = task id); results in task-major order."""
        if samples < 1:
            raise ValueError(f"samples must be >= 1, got {samples}")
        futures = [self.submit(task, task.id, index) for task in tasks for index in range(samples)]
        return list(await asyncio.gather(*futures))

    async def cancel_all(self) -> None:
        """Stop every running execution (their harnesses are killed and keys closed)."""
        pending = list(self._pending)
        for future in pending:
            future.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def close(self) -> None:
        """Cancel what still runs (harnesses killed, keys closed) and stop the progress display."""
        await self.cancel_all()
        self.progress.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()


class ExecutionPool(Pool):
    """Concurrent executions through one `ExecutionRunner`. Use inside a running event loop."""

    def __init__(
        self,
        runner: ExecutionRunner,
        *,
        concurrency: int = 8,
        score_concurrency: int | None = None,
        progress: bool = True,
        label: str = "executions",
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"ExecutionPool concurrency must be >= 1, got {concurrency}")
        if score_concurrency is not None and score_concurrency < 1:
            raise ValueError(f"ExecutionPool score_concurrency must be >= 1 or None, got {score_concurrency}")
        super().__init__()
        self.runner = runner
        self.concurrency = concurrency
        self.score_concurrency = score_concurrency or concurrency
        self.progress = PoolProgress(progress, label)
        self._slots: asyncio.Semaphore | None = None
        self._score_slots: asyncio.Semaphore | None = None

    def submit(
        self,
        task: Task,
        group: str | None = None,
        sample_index: int = 0,
        *,
        execution_id: str | None = None,
        time_limit_s: float | None = None,
        max_calls: int | None = None,
        prepare: Callable[[Path], None] | None = None,
    ) -> asyncio.Future[Execution]:
        """Queue one execution; the returned future resolves to its `Execution` once it is scored.

        ``group`` defaults to the task id; ``time_limit_s`` / ``max_calls`` override the configured
        limits for this execution; ``prepare`` is called on its fresh workspace before the harness."""
        request = ExecutionRequest(task, group, sample_index, execution_id, time_limit_s, max_calls, prepare)
        if self._slots is None:  # made here, inside the loop that will use them
            self._slots = asyncio.Semaphore(self.concurrency)
            self._score_slots = asyncio.Semaphore(self.score_concurrency)
        self.progress.submitted()
        return self._track(asyncio.ensure_future(self._run(request)))

    async def _run(self, request: ExecutionRequest) -> Execution:
        execution: Execution | None = None
        began = False

        def on_start() -> None:
            nonlocal began
            began = True
            self.progress.started()

        try:
            execution = await self.runner.run(request, slot=self._slots, score_gate=self._score_slots, on_start=on_start)
            return execution
        finally:
            self.progress.finished(execution, began)
