"""Evaluation numbers from executions: per domain pass@1, pass@k, partial score, timeouts, crashes.

Definitions (the numbers users compare checkpoints by, so they are spelled out):

- ``pass@1``: for each task, the fraction of its scorable samples that resolved it (reward 1.0), then
  the mean over tasks: the expected chance that one sample solves a task. Tasks whose every sample was
  unscorable are left out (and counted in ``unscorable``).
- ``pass@k``: the fraction of those tasks solved by at least one of their samples (``samples`` = k).
- ``mean_reward``: mean training reward over scorable executions (a fraction for NL2Repo, binary for
  SWE and Terminal-Bench).
- ``mean_partial``: mean of tests passed / tests counted over scorable executions: partial credit even
  where the reward is binary.
- ``timeouts`` / ``crashes``: executions with that status (they are still scored: partial scoring).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from gyre.harness.execution import is_scorable
from gyre.protocol import Execution


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def domain_summary(executions: Sequence[Execution]) -> dict[str, Any]:
    """The numbers above for one set of executions."""
    scorable = [e for e in executions if is_scorable(e)]
    by_task: dict[str, list[Execution]] = defaultdict(list)
    for execution in scorable:
        by_task[execution.task_id].append(execution)
    per_task = [_mean([float(e.reward >= 1.0) for e in samples]) or 0.0 for samples in by_task.values()]
    samples = max((len(v) for v in by_task.values()), default=0)
    return {
        "tasks": len({e.task_id for e in executions}),
        "executions": len(executions),
        "scorable": len(scorable),
        "pass@1": _mean(per_task),
        "samples": samples,
        "pass@k": _mean([float(any(e.reward >= 1.0 for e in v)) for v in by_task.values()]),
        "mean_reward": _mean([e.reward for e in scorable]),
        "mean_partial": _mean([float(e.reward_detail.get("fraction", 0.0)) for e in scorable]),
        "timeouts": sum(e.status == "timeout" for e in executions),
        "crashes": sum(e.status == "crashed" for e in executions),
        "unscorable": len(executions) - len(scorable),
        "mean_calls": _mean([float(len(e.calls)) for e in executions]),
        "mean_wall_s": _mean([float(e.reward_detail.get("wall_s", 0.0)) for e in executions]),
    }


def summarise(executions: Iterable[Execution]) -> dict[str, Any]:
    """``{"domains": {domain: summary}, "all": summary}``."""
    items = list(executions)
    by_domain: dict[str, list[Execution]] = defaultdict(list)
    for execution in items:
        by_domain[execution.domain or "?"].append(execution)
    return {"domains": {d: domain_summary(v) for d, v in sorted(by_domain.items())}, "all": domain_summary(items)}


def execution_rows(executions: Iterable[Execution]) -> list[dict[str, Any]]:
    """One compact row per execution for the JSON report (calls are in the proxy's records)."""
    rows = []
    for e in executions:
        d = e.reward_detail
        rows.append({
            "id": e.id, "task_id": e.task_id, "domain": e.domain, "group": e.group, "status": e.status,
            "reward": e.reward, "passed": d.get("passed"), "total": d.get("total"), "unscorable": d.get("unscorable"),
            "note": d.get("note"), "stop_reason": d.get("stop_reason"), "returncode": d.get("returncode"),
            "calls": len(e.calls), "wall_s": d.get("wall_s"), "workspace": e.workspace, "log": d.get("log"),
            "error": d.get("error"), "eval_errors": d.get("eval_errors") or [],
        })  # fmt: skip
    return rows


def format_table(summary: dict[str, Any]) -> str:
    """A plain-text table (also readable in CI logs)."""
    header = ("domain", "tasks", "runs", "pass@1", "pass@k", "partial", "reward", "timeouts", "crashes", "unscorable")
    lines = [" ".join(f"{h:>10}" for h in header)]

    def fmt(value: Any) -> str:
        return "-" if value is None else (f"{value:.3f}" if isinstance(value, float) else str(value))

    rows = list(summary["domains"].items()) + [("all", summary["all"])]
    for name, s in rows:
        cells = (name, s["tasks"], s["executions"], s["pass@1"], s["pass@k"], s["mean_partial"], s["mean_reward"],
                 s["timeouts"], s["crashes"], s["unscorable"])  # fmt: skip
        lines.append(" ".join(f"{fmt(c):>10}" for c in cells))
    return "\n".join(lines + list(CAPTION))


CAPTION = (  # printed under the table: what the columns mean (the definitions are in this module's docstring)
    "pass@1: chance one sample solves a task; pass@k: share of tasks solved by any of the k samples",
    "partial: tests passed / tests counted, averaged: credit for progress, even where the reward is all or nothing",
    "reward: the training reward, averaged: 1 only for a solved SWE or Terminal-Bench task (0 otherwise), "
    "the passed fraction for NL2Repo",
)
