"""The ``cells`` part of ``benchmarks/reliability.py``: cells killed mid-run, by role, and what the run lost.

- ``runs`` small main jobs (async scheduler, 4 cells: the core and cell3 train, cell1 and cell2 serve;
  executions on two simulated execution nodes), each with four kills injected through ``cluster.kill_cells``
  (`gyre.trainer.faults`): the training satellite mid-step 1, a rollout cell with calls in flight in step 2,
  the execution worker of node 1 with executions running in step 2 (as its node dying would), the core
  mid-step 3. Each run must end with every step logged once (``cell_steps_lost``, ``cell_steps_repeated``),
  the core rebuilt from its last checkpoint (``core_recoveries``), and no execution failed by a call the lost
  rollout cell held (``cell_loss_failed_executions``: executions trained as crashed; a call lost to its harness
  crashes it) and no call recorded twice (``cell_loss_calls_duplicated``). The dead worker's
  executions fail as ``worker_lost`` by design (unscorable, not trained): ``worker_lost_executions``.
- One satellite killed mid-step on Ray cells, in this process, against the same step on one trainer:
  ``update_max_abs_diff_after_satellite_loss`` (the weights after the step; float32).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
KILLS = ("[{cell:cell3,step:1,during:step},{cell:%s,step:2,during:rollout},{worker:worker1,step:2},"
         "{cell:cell0,step:3,during:step}]")
JOB = [
    "+recipe=terminalbench", "scheduler=async", "scheduler.rollout_cells=2", "trainer.total_steps=4", "cluster.cells=4",
    "scheduler.batch_size=8", "trainer.group_size=2", "harness.max_turns=2", "harness.reference.sub_agent=false",
    "harness.progress=false", "tracking.backends=[jsonl]", "trainer.max_tokens_per_microbatch=256",
    "cluster.execution_nodes=2", "cluster.simulate_execution_nodes=true",
]  # fmt: skip
KIND_OF = {"step": "mid_step", "rollout": "rollout_mid_call"}


def run_with_kills(run_dir: Path, rollout_cell: str, timeout_s: float) -> dict[str, Any]:
    command = [sys.executable, "-m", "gyre.main", *JOB, f"run_dir={run_dir}", f"cluster.kill_cells={KILLS % rollout_cell}"]
    started = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, check=False,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    output = done.stdout + done.stderr
    (run_dir.parent / f"{run_dir.name}.log").write_text(output)
    metrics = run_dir / "metrics.jsonl"
    steps = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    logged = [row["step"] for row in steps]
    restarts = run_dir / "core_restarts.jsonl"
    kills = re.findall(r"fault injection: killing cell (\w+) \((\w+) of step", output)
    worker_kills = re.findall(r"fault injection: killing execution worker (\w+)", output)
    return {
        "exit": done.returncode, "seconds": time.monotonic() - started,
        "kills": [{"cell": cell, "kind": "core_mid_step" if cell == "cell0" else
                   ("satellite_mid_step" if moment == "step" else "rollout_mid_call")} for cell, moment in kills]
        + [{"cell": worker, "kind": "execution_node"} for worker in worker_kills],
        "steps_lost": len(set(range(1, 5)) - set(logged)), "steps_repeated": len(logged) - len(set(logged)),
        "core_recoveries": len(restarts.read_text().splitlines()) if restarts.exists() else 0,
        "failed_executions": sum(row.get("executions/crashed", 0) for row in steps),
        "redone_microbatches": sum(row.get("cells/microbatches_redone", 0) for row in steps),
        # cumulative per attempt of the run: the most any step logged (a core restart counts from 0 again)
        "worker_lost_executions": max((row.get("executions/lost", 0) for row in steps), default=0),
        "cells_replaced": max((row.get("cells/replaced", 0) for row in steps), default=0),
        **recorded_calls(run_dir / "records"),
        "tail": output[-1500:] if done.returncode else "",
    }


def recorded_calls(folder: Path) -> dict[str, int]:
    """Calls on disk, and those recorded twice (one call id in two lines: a retried call answered twice)."""
    ids = [json.loads(line)["call_id"] for path in sorted(folder.glob("*.jsonl"))
           for line in path.read_text().splitlines() if line.strip()]
    return {"calls_recorded": len(ids), "calls_duplicated": len(ids) - len(set(ids))}


def satellite_loss_update(model_path: str, kill_after: int = 2) -> dict[str, Any]:
    """A step on three trainer cells whose satellite cell2 is killed once it has trained ``kill_after``
    micro-batches, against the same micro-batches trained by one model in this process."""
    import ray
    import torch

    from gyre.algo.losses import LossConfig
    from gyre.models import load_model
    from gyre.replica.step import StepConfig, train_step
    from gyre.scheduler.state import Role
    from gyre.trainer.cluster import Cluster, ClusterConfig
    from gyre.trajectory import pack_trees
    from gyre.trajectory.processor import TrajectoryConfig, process_executions
    from gyre.trajectory.synthetic import WorkloadSpec, synthetic_execution

    lr = 1e-3
    spec = WorkloadSpec(turns=4, system_tokens=16, task_tokens=16, response_tokens=(8, 16), tool_tokens=(8, 24))
    executions = [synthetic_execution(f"e{i}", spec, seed=i, group=f"g{i % 4}") for i in range(18)]
    for i, execution in enumerate(executions):
        execution.reward = float(i % 3 == 0)
    trees = process_executions(executions, TrajectoryConfig(max_paths=None))
    batches = pack_trees(trees, max_tokens=max(t.num_tokens for t in trees))  # one tree per micro-batch

    reference = load_model(model_path)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=lr, weight_decay=0.0)
    expected = train_step(reference, optimizer, batches, LossConfig(), StepConfig(attention_backend="block"))
    cfg = ClusterConfig(cells=3, cpus_per_cell=0.5,
                        cell={"model_path": model_path, "lr": lr, "loss": {}, "step": {"attention_backend": "block"}})

    async def scenario() -> tuple[dict, dict, dict, list]:
        cluster = Cluster(cfg)
        try:
            await cluster.start_rollout()
            await cluster.switch_many({cell_id: Role.TRAIN for cell_id in cluster.ids})
            step = asyncio.create_task(cluster.train_step(batches, max_grad_norm=1.0))
            while cluster.step is None or cluster.step.done_by.get("cell2", 0) < kill_after:
                await asyncio.sleep(0.005)
            ray.kill(cluster.cells["cell2"].engine_rank)
            metrics = await step
            return metrics, await cluster.core.state_dict(), await cluster.cells["cell1"].state_dict(), cluster.lost
        finally:
            await cluster.close()

    metrics, core, satellite, lost = asyncio.run(scenario())
    return {
        "metrics": metrics, "expected": expected, "lost": lost, "batches": len(batches),
        "max_abs_diff": max((core[name] - value).abs().max().item() for name, value in reference.state_dict().items()),
        "satellite_matches_core": all(torch.equal(satellite[name], core[name]) for name in core),
    }


def cells_part(work: Path, runs: int, timeout_s: float = 600) -> dict[str, Any]:
    from gyre.models import tiny_path
    from gyre.single_controller.local_ray import LocalRay

    results = [run_with_kills(work / f"cell-kills-{i}", ("cell1", "cell2")[i % 2], timeout_s) for i in range(runs)]
    kills = [kill for result in results for kill in result["kills"]]
    figures: dict[str, Any] = {
        "cell_kill_runs": runs, "cell_kill_runs_finished": sum(r["exit"] == 0 for r in results),
        "cell_kills": len(kills),
        **{f"cell_kills_{kind}": sum(k["kind"] == kind for k in kills)
           for kind in ("satellite_mid_step", "rollout_mid_call", "execution_node", "core_mid_step")},
        "cell_steps_lost": sum(r["steps_lost"] for r in results),
        "cell_steps_repeated": sum(r["steps_repeated"] for r in results),
        "core_recoveries": sum(r["core_recoveries"] for r in results),
        "cell_loss_failed_executions": sum(r["failed_executions"] for r in results),
        "cell_loss_redone_microbatches": sum(r["redone_microbatches"] for r in results),
        "worker_lost_executions": sum(r["worker_lost_executions"] for r in results),
        "cell_loss_calls_recorded": sum(r["calls_recorded"] for r in results),
        "cell_loss_calls_duplicated": sum(r["calls_duplicated"] for r in results),
        "cells_replaced": sum(r["cells_replaced"] for r in results),  # lost satellites back under their id
        "cell_kill_run_s": [round(r["seconds"], 1) for r in results],
        "cell_kill_failures": [r["tail"] for r in results if r["exit"]],
    }
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with LocalRay():
        exact = satellite_loss_update(str(tiny_path()))
    metrics, expected = exact["metrics"], exact["expected"]
    figures.update(update_max_abs_diff_after_satellite_loss=exact["max_abs_diff"],
                   satellite_loss_loss_rel_diff=abs(metrics["loss"] - expected["loss"]) / max(abs(expected["loss"]), 1e-12),
                   satellite_loss_grad_norm_rel_diff=abs(metrics["grad_norm"] - expected["grad_norm"]) / expected["grad_norm"],
                   satellite_loss_lost=[(entry["cell"], entry["role"]) for entry in exact["lost"]],
                   satellite_loss_microbatches=exact["batches"],
                   satellite_loss_microbatches_by_cell={c: metrics[f"microbatches/{c}"] for c in ("cell0", "cell1", "cell2")},
                   satellite_loss_redone_microbatches=metrics["microbatches_redone"],
                   satellite_loss_version=metrics["version"],
                   satellite_loss_live_satellite_synced=exact["satellite_matches_core"])
    return figures
