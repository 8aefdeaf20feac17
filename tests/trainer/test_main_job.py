"""The main job end to end under each scheduler: it trains, checkpoints, writes wandb offline files and
the cell-role timeline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[2]
CELLS = {1: 3, 2: 2}  # ranks per cell -> cells: 3 one-rank cells, or 2 cells x 2 ranks (FSDP2-sharded replicas)
# Metric families named after what happened (a role, a kind of switch, a cell): compared as a family.
EVENT_FAMILIES = {"idle_fraction", "switch", "microbatches", "cells", "reward", "pass_rate"}


def scheduler_run(scheduler: str, ranks: int, run_dir: Path, steps: int = 2, batch_size: int = 4) -> list[str]:
    cells = CELLS[ranks]
    return [
        "+recipe=terminalbench", f"scheduler={scheduler}", f"run_dir={run_dir}", f"trainer.total_steps={steps}",
        f"cluster.cells={cells}", f"cluster.ranks_per_cell={ranks}", f"scheduler.batch_size={batch_size}",
        "trainer.group_size=2", "scheduler.rollout_cells=1",
        "harness.reference.sub_agent=false", "harness.progress=false", "tracking.backends=[jsonl,wandb]",
        # elastic (streaming steps, satellites joining) also runs two PPO epochs per step
        *(["trainer.ppo_epochs=2"] if scheduler == "elastic" else []),
        # async's executions make several calls: their sessions wait on tools between them (parking), ~0.37 s
        # each: a park is asked for in the background as a call returns, and a tool gap of milliseconds (this
        # suite's tools) can end before the park lands, so neither the router nor the check sees a parked gap
        f"harness.max_turns={3 if scheduler == 'async' else 1}",
        *(["harness.reference.tool_delay_mu=-1.0", "harness.reference.tool_delay_sigma=0.0"] if scheduler == "async" else []),
    ]


def run_main_job(overrides: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True,
                          timeout=600, env={**env, "RAY_AUTH_MODE": "disabled"}, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.fixture(scope="module")
def elastic_run(tmp_path_factory) -> Path:
    """The elastic job on one-rank cells: checked below as every scheduler's run is, and the single-machine
    reference of the same job on simulated execution nodes."""
    run_dir = tmp_path_factory.mktemp("elastic") / "run"
    run_main_job(scheduler_run("elastic", 1, run_dir))
    return run_dir


# The sharded elastic run carries a KL term (each replica then holds a frozen reference, sharded like the policy):
# checked as every scheduler's run is, and then resumed on cells of another size.
KL = "algo.kl_coef=0.05"


@pytest.fixture(scope="module")
def sharded_kl_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("sharded_kl") / "run"
    run_main_job([*scheduler_run("elastic", 2, run_dir), KL])
    return run_dir


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, 2], ids=["1-rank-cells", "2-rank-cells"])
@pytest.mark.parametrize("scheduler", ["elastic", "colocate", "async"])
def test_main_job_runs_under_each_scheduler(tmp_path, request, scheduler, ranks):
    cells = CELLS[ranks]
    if scheduler == "elastic":
        run_dir = request.getfixturevalue("elastic_run" if ranks == 1 else "sharded_kl_run")
    else:
        run_dir = tmp_path / "run"
        run_main_job(scheduler_run(scheduler, ranks, run_dir))
    steps = metrics(run_dir)
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["scheduler"]["name"] == scheduler and s["version"] == s["step"] for s in steps)
    assert all(s["executions/trained"] >= 4 and s["tokens/tree"] > 0 for s in steps)
    for s in steps:  # each execution's wall time splits into model-call time and the rest (sim calibration)
        split = zip(s["rollout/execution_time_s"], s["rollout/model_time_s"], s["rollout/tool_time_s"], strict=True)
        for wall, model, rest in split:  # model time is within the wall time (not just wall = model + its rest)
            assert 0 < model <= wall and rest == pytest.approx(wall - model), s
        assert len(s["rollout/execution_calls"]) == len(s["rollout/execution_time_s"])
    assert (run_dir / "timeline.png").stat().st_size > 1000
    latest = run_dir / "checkpoints" / "latest"
    assert os.readlink(latest) == "step_000002"
    # A checkpoint is an HF folder (servable and evaluable) with the trainer's state beside it.
    assert {"config.json", "model.safetensors", "tokenizer.json", "trainer_state.pt", "driver.json"} <= {p.name for p in latest.iterdir()}
    assert all(s["executions/no_calls"] == 0 for s in steps)
    # the loss's parts are logged only where a term adds to it (the sharded elastic run's KL): else loss is pg_loss
    with_kl = scheduler == "elastic" and ranks == 2
    assert all(("pg_loss" in s) == ("kl" in s) == with_kl for s in steps)
    assert list((run_dir / "wandb").glob("offline-run-*"))
    if scheduler == "elastic":  # the second epoch ran on moved weights; the version still counts steps
        assert all(s["last_epoch/ratio_max"] > 1.0 for s in steps)
    if scheduler == "async":  # the fixed split: the one rollout satellite never trains
        assert all(s["train/cells"] == cells - 1 for s in steps)
        # Sessions waiting on tools were parked on the serving cell's engine (KV to host memory) and restored
        # from there by their next calls: what the simulator's restore rate is fitted from
        assert sum(s["parking/parks"] for s in steps) > 0 and sum(s["parking/restores"] for s in steps) > 0, steps
        assert sum(s["parking/transfer_bytes"] for s in steps) > 0 and sum(s["parking/transfer_s"] for s in steps) > 0
        # ... the slots they gave back, as the router counts them, and the share of time sessions held one
        shares = [s["parking/slot_share"] for s in steps]
        assert sum(s["parking/parked_slot_s"] for s in steps) > 0 and all(0 < x <= 1 for x in shares) and min(shares) < 1, shares
    assert all(s["parking/parks"] >= 0 and s["parking/recomputed_tokens"] >= 0 for s in steps)


@pytest.mark.slow
def test_a_sharded_run_resumes_on_cells_of_another_size_and_continues_its_wandb_run_timeline_and_curves(
        tmp_path, sharded_kl_run):
    """The sharded elastic run above (algo.kl_coef > 0 on 2-rank cells, two steps), resumed for a third step on
    1-rank cells: the checkpoint holds whole weights and an optimizer state keyed by parameter name, so it loads
    on any number of ranks; and the resumed run continues the first's wandb run, timeline and curves, each metric
    under one name. (A driver killed mid-run and resumed, with no step lost or repeated, is the kill part of
    ``benchmarks/reliability.py``, checked by its documented command in tests/test_documented_commands.py.)"""
    assert (sharded_kl_run / "curves.png").stat().st_size > 1000
    run_id = (sharded_kl_run / "wandb_id").read_text().strip()
    run_dir = copy_of(sharded_kl_run, tmp_path)
    run_main_job([*scheduler_run("elastic", 1, run_dir, steps=3), KL, "trainer.resume=true"])
    rows = metrics(run_dir)
    assert [(row["step"], row["version"]) for row in rows] == [(1, 1), (2, 2), (3, 3)]
    assert all("kl" in row for row in rows)
    assert os.readlink(run_dir / "checkpoints" / "latest") == "step_000003"

    assert (run_dir / "wandb_id").read_text().strip() == run_id
    offline = sorted((run_dir / "wandb").glob("offline-run-*"))
    assert len(offline) == 2 and all(f"-{run_id}" in folder.name for folder in offline)

    events = [json.loads(line) for line in (run_dir / "timeline.jsonl").read_text().splitlines()]
    assert {e["session"] for e in events if "cell" in e} == {0, 1}, "the roles before the resume are kept"
    assert {e["role"] for e in events if e.get("session") == 0 and "cell" in e} >= {"rollout", "train"}
    assert (run_dir / "timeline.png").stat().st_size > 1000 and (run_dir / "curves.png").stat().st_size > 1000
    for row in rows:  # one name per metric: the namespaced one (pg_loss is logged beside loss: a KL term adds to it)
        assert {"train/time_s", "train/weight_sync_s", "train/cells", "tokens/tree", "loss", "pg_loss"} <= set(row)
        assert not {"train_time_s", "weight_sync_s", "trainer_members", "tree_tokens"} & set(row)


@pytest.mark.slow
def test_the_main_job_on_two_simulated_execution_nodes_streaming_in_its_batch(tmp_path, elastic_run):
    """The elastic job with ``cluster.execution_nodes=2`` (gyre.harness.nodes; two executions at a time on each,
    so both take work): trains, its executions ran on both nodes through their proxy replicas, and it logs
    every metric the same job logs on one machine. Its steps stream in their batch (``scheduler.stream_from=0.25``:
    a step starts on a quarter of its batch of 8, and the rest comes in as it finishes) and train it whole."""
    run_dir = tmp_path / "nodes"
    run_main_job([*scheduler_run("elastic", 1, run_dir, batch_size=8), "scheduler.stream_from=0.25",
                  "cluster.execution_nodes=2", "cluster.simulate_execution_nodes=true", "harness.concurrency=2"])
    local, steps = (metrics(d) for d in (elastic_run, run_dir))
    assert [s["step"] for s in steps] == [1, 2]
    assert all(s["executions/trained"] >= 8 and s["tokens/tree"] > 0 and s["executions/no_calls"] == 0 for s in steps)
    assert all(s["executions/lost"] == 0 for s in steps)
    assert max(s["executions/nodes"] for s in steps) == 2  # both nodes' workers and replicas served the run
    shape = [{k: v for k, v in s.items() if k.startswith("executions/") or k in ("step", "version")} for s in steps]
    assert all(s["version"] == s["step"] for s in steps), shape  # one update per step, the streamed-in part in it
    assert any(s["executions/streamed_in"] > 0 for s in steps), shape  # a step took executions that finished after it began
    assert all(s["executions/streamed_in"] <= 6 for s in steps), shape  # it began on at least its first quarter

    def keys(run: list[dict]) -> set[str]:
        """Metric names, those named after what happened as their family: ``switch/train_to_rollout_s``
        appears once such a switch happened, in either layout."""
        return {key.split("/")[0] + "/*" if key.split("/")[0] in EVENT_FAMILIES else key for step in run for key in step}

    assert keys(steps) - keys(local) == {"executions/nodes"} and keys(local) <= keys(steps)
    records = list((run_dir / "records").glob("*.jsonl"))
    assert len(records) >= 8  # written by the replicas into the run's records folder, as on one machine


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of a finished run (a module fixture's) for a test to resume: the resume writes into it."""
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy, symlinks=True)
    return copy


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
