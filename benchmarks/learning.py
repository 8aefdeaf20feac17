"""Does RL improve the agent, on branching executions? The learning recipe end to end, on the sealed test split,
next to its baselines, with 95% intervals.

    python benchmarks/learning.py --out learning.json [--seeds 0 1 2] [--steps N] [--work DIR] [--cache DIR]
                                  [--warm-start-seed S|own]
    python benchmarks/learning.py --out learning_ablation.json --ablation [--seeds 0] [--work DIR --cache DIR]
    python benchmarks/learning.py --out learning_schedulers.json --schedulers [--seeds 0] [--work DIR --cache DIR]

The main figures, for each seed, from a clean cache (a fresh ``GYRE_CACHE`` the seeds share, one per seed with
``--warm-start-seed own``; ``--cache`` names one instead):

1. **greedy**: ``python -m gyre.main +recipe=learn`` with no RL step builds the supervised warm start (model,
   demonstrations of the branching ``search`` family through the proxy, SFT) and validates it on the test
   split at temperature 0: the greedy baseline.
2. **rl**: the recipe (elastic scheduler, 4 cells, ``trajectory.max_paths=5``), validated on the test split
   before the first step (the warm start at temperature 1: the "before" figure) and after the last.
3. **control**: the same from the same warm start with rewards shuffled across each step's executions (no
   signal), validated after its last step (its "before" is the rl run's: the same checkpoint).
4. **greedy_after_rl**: the rl run's last checkpoint validated at temperature 0 (``~warm_start``, no step):
   whether RL improved the agent one would deploy, not only its samples at temperature 1.

Every seed starts from the recipe's one warm start (``warm_start.seed``, pinned to 2 in conf/recipe/learn.yaml),
built once in a cache the seeds share, so the seeds vary the RL alone: the spread reported is RL's.
``--warm-start-seed S`` takes seed S's warm start instead; ``--warm-start-seed own``: each seed draws its own (its
recordings, the SFT's data order and renaming; a clean cache each), and the spread is the whole pipeline's.

The test split (``recipes/learn/tasks/test``) is evaluated here only; the recipe validates on ``dev``, the
split to tune on. Pass rate = share of executions with full credit. Every validation must score all the
executions it planned (each test task enough times for at least ``--min-executions``: 4 x 48 = 192), else the
benchmark stops naming it. Pass rates carry Wilson 95% intervals (over tasks for the greedy baseline: its
repeats of a task are copies, so 4 x 48 executions are 48 observations), gains bootstrap 95% intervals over
tasks, each with all its executions on both sides (paired: both validations ran the same tasks;
``gyre.trainer.intervals``). Runs already finished in ``--work`` are reused, not run again.

``--ablation`` (bounded sampling): rl runs with ``trajectory.max_paths`` 5 (the recipe's; reused from
``--work`` when the main figures ran there), uncapped (null) and 1: the gain of each and the trainer's
forward+backward seconds per step, in the runs and replayed side by side in one process on the uncapped
run's own training executions (same executions, same weights, only the cap differs: the ratio that is
not moved by the rollouts sharing the cores). ``--schedulers``: rl runs under ``scheduler=colocate`` and
``scheduler=async`` (``max_staleness=1``) next to elastic (reused likewise): the gain of each.

JSON keys (the first seed's, plus ``<key>_seeds`` lists, medians and minima when several seeds run):
``test_pass_rate_before``/``_after`` (and ``_ci``), ``gain`` (``gain_ci``), ``greedy_warm_start_pass_rate``
(``_ci``), ``gain_over_greedy`` (``_ci``: after RL at temperature 1 against the warm start greedy),
``greedy_pass_rate_after_rl`` (``_ci``) and ``greedy_gain`` (``_ci``: greedy after RL against greedy before),
``control_pass_rate_after`` (``_ci``), ``control_gain`` (``_ci``), ``mean_paths_per_execution`` and
``shared_token_fraction`` (the rl run's training executions, before the cap), ``executions_per_validation``,
``steps``, ``wall_s`` (the seed's runs), ``warm_start_s`` (building it; 0 when taken from the cache),
``greedy_s``, ``rl_s``, ``control_s``, ``warm_start_seed`` (null: each seed drew its own); kept from before:
``val_pass_rate_before``/``_after``, ``control_pass_rate_before`` (the same figures). Ablation:
``gain_max_paths_5``, ``gain_uncapped``, ``gain_max_paths_1`` (``_ci``), ``test_pass_rate_after_*`` (``_ci``),
``fwd_bwd_s_per_step_*``, ``fwd_bwd_s_ratio_5_vs_uncapped`` (replayed), ``fwd_bwd_s_ratio_5_vs_uncapped_in_run``,
``tree_tokens_ratio_5_vs_uncapped``. Schedulers: ``gain_elastic``, ``gain_colocate``, ``gain_async`` (``_ci``),
``rl_s_<scheduler>``. Writes ``learning_curve.png`` (or ``<out>.png`` for the other modes) beside the JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gyre.trainer.intervals import IncompleteValidation, bootstrap_paired_by_task, check_complete, pass_rate_interval  # noqa: E402

TEST = "recipes/learn/tasks/test"
# --ablation's runs: label -> (run folder, overrides). The recipe's cap (conf/trajectory/default.yaml: 5) is the
# main figures' rl run itself, with no override, so that the same --work reuses it rather than running it again.
ABLATION_RUNS = {"max_paths_5": ("rl", []), "uncapped": ("rl_uncapped", ["trajectory.max_paths=null"]),
                 "max_paths_1": ("rl_max_paths_1", ["trajectory.max_paths=1"])}
TARGETS = {"median_gain": 0.25, "every_seed_gain": 0.15, "control_gain_below": 0.1, "mean_paths": 2.0,
           "fwd_bwd_ratio": 0.85}


def recipe() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "conf/recipe/learn.yaml").read_text())


def job_overrides(run_dir: Path, seed: int, steps: int, extra: list[str]) -> list[str]:
    """The Hydra overrides of one benchmark run (as its ``.hydra/overrides.yaml`` records them)."""
    return ["+recipe=learn", f"seed={seed}", f"run_dir={run_dir}", f"trainer.total_steps={steps}",
            "harness.progress=false", "tracking.backends=[jsonl]", *extra]


def run_job(run_dir: Path, seed: int, steps: int, cache: Path, extra: list[str], log: Path) -> float:
    """One ``gyre.main`` run; returns its wall time. Its output goes to ``log``."""
    command = [sys.executable, "-m", "gyre.main", *job_overrides(run_dir, seed, steps, extra)]
    print(f"  {run_dir.name}: {' '.join(command[3:])}", flush=True)
    started = time.perf_counter()
    with log.open("w") as handle:
        done = subprocess.run(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT,
                              env={**os.environ, "GYRE_CACHE": str(cache), "RAY_AUTH_MODE": "disabled"})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed (exit {done.returncode}); see {log}")
    return time.perf_counter() - started


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def validations(run_dir: Path, minimum: int, tasks: list[str] | None = None) -> dict[int, dict]:
    """The run's validations by step, each checked: every planned execution scored, at least ``minimum``.
    ``tasks``: the validated split's task ids in the order a validation runs them (noted in each row as
    ``val/tasks``)."""
    found = {int(row["val/step"]): {**row, "val/tasks": tasks} for row in metrics(run_dir) if "val/pass_rate" in row}
    for row in found.values():
        check_complete(row, str(run_dir))
        if row["val/planned"] < minimum:
            raise IncompleteValidation(f"{run_dir}: validation at step {row['val/step']} planned {row['val/planned']} "
                                       f"executions, fewer than --min-executions={minimum}")
    return dict(sorted(found.items()))


def passes(row: dict) -> list[float]:
    return [float(reward >= 1.0) for reward in row["val/rewards"]]


def task_ids(row: dict) -> list[str]:
    """The task of each of the row's rewards. A run from before validations logged them: its rewards are in
    the order of the split's tasks (``val/tasks``, noted by `validations`), ``val/planned / len(tasks)`` each
    (complete: `validations` checked it)."""
    if "val/task_ids" in row:
        return row["val/task_ids"]
    tasks = row["val/tasks"]
    per_task = row["val/planned"] // len(tasks)
    return [tasks[index // per_task] for index in range(len(row["val/rewards"]))]


def rate(row: dict) -> tuple[float, list[float]]:
    """The pass rate and its Wilson interval (over tasks where each task's repeats are copies: greedy)."""
    return row["val/pass_rate"], list(pass_rate_interval(row["val/rewards"], task_ids(row)))


def gain(after: dict, before: dict, seed: int) -> tuple[float, list[float]]:
    """after - before on the same tasks, with a bootstrap interval over tasks (paired: `intervals`)."""
    interval = bootstrap_paired_by_task(passes(after), task_ids(after), passes(before), task_ids(before), seed=seed)
    return after["val/pass_rate"] - before["val/pass_rate"], list(interval)


def finished(run_dir: Path, steps: int, minimum: int, overrides: list[str]) -> bool:
    """A run of ``--work`` made with these very ``overrides`` that has its final validation (reused: a
    benchmark run again in the same ``--work`` runs only what it lacks, and --ablation / --schedulers reuse
    the main figures' rl run). A run made otherwise (other steps, another override) is run again."""
    import yaml

    try:
        made_with = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())
        return made_with == overrides and max(validations(run_dir, minimum)) == steps
    except (OSError, ValueError, IncompleteValidation):
        return False


def training_shape(run_dir: Path) -> dict[str, float]:
    rows = [row for row in metrics(run_dir) if "trees/paths_mean" in row]
    mean = lambda key: statistics.fmean(row[key] for row in rows)  # noqa: E731
    return {"mean_paths_per_execution": mean("trees/paths_mean"), "shared_token_fraction": mean("trees/shared_token_fraction"),
            "fwd_bwd_s_per_step": mean("train/fwd_bwd_s"), "tree_tokens_per_step": mean("tokens/tree")}


def task_ids_of(split: str) -> list[str]:
    """The ids of the tasks in ``split`` (a folder of task folders), in the order a validation runs them."""
    from gyre.envs.loaders import load_tasks

    folder = Path(split) if Path(split).is_absolute() else ROOT / split
    tasks = [task.id for task in load_tasks("nl2repo", folder).tasks] if folder.is_dir() else []
    if not tasks:
        raise SystemExit(f"--test {split}: no task folders in {folder}")
    return tasks


class Seed:
    """The runs of one seed under ``work``, against the test split."""

    def __init__(self, seed: int, steps: int, work: Path, cache: Path, overrides: list[str], minimum: int,
                 test: str = TEST) -> None:
        self.seed, self.steps, self.work, self.cache, self.minimum = seed, steps, work, cache, minimum
        self.tasks = task_ids_of(test)
        # Enough samples of each test task that a validation plans at least ``minimum`` executions (the recipe's
        # own val_samples is for its dev split); an --override of trainer.val_samples still wins.
        samples = max(1, math.ceil(minimum / len(self.tasks)))
        self.common = [f"env.val_path={test}", f"trainer.val_samples={samples}", *overrides]
        cells = [o.split("=", 1)[1] for o in overrides if o.startswith("cluster.cells=")]
        self.cells = int(cells[-1]) if cells else 4  # conf/cluster/cpu.yaml

    def run(self, name: str, steps: int, extra: list[str], warm_start: bool = True) -> tuple[dict, float]:
        """The validations of run ``name`` and the seconds it took; reused, with the seconds it took then,
        where ``work`` holds it finished (its last validation at ``steps``). ``warm_start=False``: a run of
        a given model (``~warm_start``), without the warm start's overrides (the config has no such key)."""
        common = self.common if warm_start else [o for o in self.common if not o.startswith("warm_start.")] + ["~warm_start"]
        run_dir, seconds_file = self.work / name, self.work / f"{name}.seconds"
        if finished(run_dir, steps, self.minimum, job_overrides(run_dir, self.seed, steps, [*common, *extra])):
            print(f"  {name}: reusing {run_dir}", flush=True)
            seconds = float(seconds_file.read_text()) if seconds_file.is_file() else float("nan")
        else:
            seconds = run_job(run_dir, self.seed, steps, self.cache, [*common, *extra], self.work / f"{name}.log")
            seconds_file.write_text(f"{seconds:.1f}\n")
        return validations(run_dir, self.minimum, self.tasks), seconds

    def rl(self, name: str = "rl", extra: list[str] = ()) -> tuple[dict, float]:
        """An RL run validated before its first step and after its last."""
        return self.run(name, self.steps, [f"trainer.val_every={self.steps}", *extra])

    def main(self) -> dict:
        started = time.perf_counter()
        greedy_rows, greedy_s = self.run("greedy", 0, ["trainer.val_every=1", "harness.temperature=0"])
        greedy = greedy_rows[0]
        warm_start_s = json.loads((self.work / "greedy" / "warm_start.json").read_text())["built_s"]
        rl, rl_s = self.rl()
        control, control_s = self.run("control", self.steps, [f"trainer.val_every={self.steps}", "trainer.val_at_start=false",
                                                              "trajectory.shuffle_rewards=true"])
        final = self.work / "rl" / "checkpoints" / "latest"
        greedy_after_rows, greedy_after_s = self.run("greedy_after_rl", 0, [f"model.path={final.resolve()}", "trainer.val_every=1",
                                                                          "harness.temperature=0"], warm_start=False)
        greedy_after = greedy_after_rows[0]
        before, after, control_after = rl[0], rl[self.steps], control[self.steps]
        result: dict = {"seed": self.seed, "steps": self.steps, "executions_per_validation": before["val/executions"]}
        result["test_pass_rate_before"], result["test_pass_rate_before_ci"] = rate(before)
        result["test_pass_rate_after"], result["test_pass_rate_after_ci"] = rate(after)
        result["gain"], result["gain_ci"] = gain(after, before, self.seed)
        result["greedy_warm_start_pass_rate"], result["greedy_warm_start_pass_rate_ci"] = rate(greedy)
        result["gain_over_greedy"], result["gain_over_greedy_ci"] = gain(after, greedy, self.seed)
        result["greedy_pass_rate_after_rl"], result["greedy_pass_rate_after_rl_ci"] = rate(greedy_after)
        result["greedy_gain"], result["greedy_gain_ci"] = gain(greedy_after, greedy, self.seed)
        result["control_pass_rate_after"], result["control_pass_rate_after_ci"] = rate(control_after)
        result["control_gain"], result["control_gain_ci"] = gain(control_after, before, self.seed)
        shape = training_shape(self.work / "rl")
        result["mean_paths_per_execution"] = shape["mean_paths_per_execution"]
        result["shared_token_fraction"] = shape["shared_token_fraction"]
        result.update(val_pass_rate_before=result["test_pass_rate_before"], val_pass_rate_after=result["test_pass_rate_after"],
                      control_pass_rate_before=result["test_pass_rate_before"])
        result.update(warm_start_s=warm_start_s, greedy_s=greedy_s, rl_s=rl_s, control_s=control_s,
                      greedy_after_rl_s=greedy_after_s, wall_s=time.perf_counter() - started)
        result["curve"] = {"rl": {step: row["val/pass_rate"] for step, row in rl.items()},
                           "control": {0: before["val/pass_rate"], self.steps: control_after["val/pass_rate"]},
                           "greedy": {0: greedy["val/pass_rate"], self.steps: greedy_after["val/pass_rate"]}}
        return result

    def ablation(self, replay_batches: int, replay_rounds: int) -> dict:
        started = time.perf_counter()
        result: dict = {"seed": self.seed, "steps": self.steps}
        for label, (name, extra) in ABLATION_RUNS.items():
            rows, seconds = self.rl(name, extra)
            result[f"gain_{label}"], result[f"gain_{label}_ci"] = gain(rows[self.steps], rows[0], self.seed)
            # each run validates the same warm start at its step 0 (a draw of its own): its "after" compares too
            result[f"test_pass_rate_after_{label}"], result[f"test_pass_rate_after_{label}_ci"] = rate(rows[self.steps])
            shape = training_shape(self.work / name)
            result[f"fwd_bwd_s_per_step_{label}"] = shape["fwd_bwd_s_per_step"]
            result[f"tree_tokens_per_step_{label}"] = shape["tree_tokens_per_step"]
            result[f"rl_s_{label}"] = seconds
        result["fwd_bwd_s_ratio_5_vs_uncapped_in_run"] = result["fwd_bwd_s_per_step_max_paths_5"] / result["fwd_bwd_s_per_step_uncapped"]
        result["tree_tokens_ratio_5_vs_uncapped"] = result["tree_tokens_per_step_max_paths_5"] / result["tree_tokens_per_step_uncapped"]
        replay = replay_fwd_bwd(self.work / "rl_uncapped", batches=replay_batches, rounds=replay_rounds, seed=self.seed)
        result.update(replay)
        result["fwd_bwd_s_ratio_5_vs_uncapped"] = replay["replay_fwd_bwd_s_max_paths_5"] / replay["replay_fwd_bwd_s_uncapped"]
        result["wall_s"] = time.perf_counter() - started
        return result

    def scheduler_runs(self) -> dict[str, tuple[str, list[str]]]:
        """--schedulers' runs: label -> (run folder, overrides); elastic is the recipe's scheduler, so the main
        figures' rl run itself (reused from the same --work)."""
        # async: half the cells only roll out (the core and the rest train), one batch of look-ahead
        rollout = f"scheduler.rollout_cells={max(1, self.cells // 2)}"
        return {"elastic": ("rl", []), "colocate": ("rl_colocate", ["scheduler=colocate"]),
                "async": ("rl_async", ["scheduler=async", "scheduler.max_staleness=1", rollout])}

    def schedulers(self) -> dict:
        started = time.perf_counter()
        result: dict = {"seed": self.seed, "steps": self.steps}
        for label, (name, extra) in self.scheduler_runs().items():
            rows, seconds = self.rl(name, extra)
            result[f"gain_{label}"], result[f"gain_{label}_ci"] = gain(rows[self.steps], rows[0], self.seed)
            result[f"test_pass_rate_after_{label}"], result[f"test_pass_rate_after_{label}_ci"] = rate(rows[self.steps])
            result[f"rl_s_{label}"] = seconds
        result["wall_s"] = time.perf_counter() - started
        return result


def replay_fwd_bwd(run_dir: Path, batches: int, rounds: int, seed: int) -> dict:
    """Forward+backward seconds of the run's own training executions under each cap, side by side in this
    process: the first ``batches`` steps' worth of executions (records, in the order they finished), each
    batch trained under max_paths 5, uncapped and 1 in turn, ``rounds`` times over (alternating, so load
    from elsewhere falls on all three alike), from the warm start's weights."""
    import numpy as np

    from gyre.algo.losses import LossConfig
    from gyre.models import load_model
    from gyre.protocol import Execution
    from gyre.proxy.recorder import read_record_file
    from gyre.replica.step import StepConfig, microbatch_backward
    from gyre.trajectory import pack_trees
    from gyre.trajectory.processor import TrajectoryConfig, process_executions

    step = next(row for row in metrics(run_dir) if "scheduler" in row)  # the run's own batch, as it logged it
    batch_size, group = int(step["scheduler"]["batch_size"]), int(step["group_size"])
    files = sorted((run_dir / "records").glob("train-*.jsonl"), key=lambda f: f.stat().st_mtime)
    rng = np.random.default_rng(seed)
    executions = []
    for file in files:
        calls = read_record_file(file, [])
        if calls:  # rewards only scale the loss weights: any mix of them costs the same compute
            executions.append(Execution(calls[0].execution_id, file.stem.rsplit("-s", 1)[0], "", calls, reward=float(rng.random() < 0.5)))
    steps = [executions[i:i + batch_size] for i in range(0, len(executions) - batch_size + 1, batch_size)][:batches]
    if not steps:
        raise RuntimeError(f"{run_dir}: no {batch_size} training executions recorded to replay")
    for batch in steps:
        for index, execution in enumerate(batch):
            execution.group = f"g{index // group}"
    checkpoint = json.loads((run_dir / "warm_start.json").read_text())["checkpoint"]
    model = load_model(checkpoint, dtype="float32")
    model.train()
    step_cfg = StepConfig(attention_backend="block")
    caps = {"max_paths_5": 5, "uncapped": None, "max_paths_1": 1}
    packed = {label: [pack_trees(process_executions(batch, TrajectoryConfig(max_paths=cap, seed=seed)),
                                 int(recipe()["trainer"].get("max_tokens_per_microbatch", 16384))) for batch in steps]
              for label, cap in caps.items()}
    def fwd_bwd(label: str, index: int) -> float:
        model.zero_grad(set_to_none=True)
        started = time.perf_counter()
        for micro in packed[label][index]:
            microbatch_backward(model, micro, LossConfig(), step_cfg)
        return time.perf_counter() - started

    for label in caps:  # warm-up: the first passes allocate and tune kernels
        fwd_bwd(label, 0)
    seconds = {label: 0.0 for label in caps}
    order = list(caps)
    for round_ in range(rounds):
        for index in range(len(steps)):
            for label in order[round_ % 3:] + order[:round_ % 3]:  # each cap goes first in turn
                seconds[label] += fwd_bwd(label, index)
    count = rounds * len(steps)
    out = {f"replay_fwd_bwd_s_{label}": value / count for label, value in seconds.items()}
    out.update({f"replay_tree_tokens_{label}": float(np.mean([sum(b.num_tokens for b in micro) for micro in packed[label]]))
                for label in caps})
    out["replay_steps"], out["replay_rounds"] = len(steps), rounds
    return out


def summarise(results: list[dict], keys: list[str]) -> dict:
    output = {k: v for k, v in results[0].items() if k != "curve"}
    if len(results) > 1:
        for key in keys:
            values = [r[key] for r in results if key in r]
            if len(values) == len(results):
                output[f"{key}_seeds"] = values
                output[f"{key}_median"] = statistics.median(values)
                output[f"{key}_min"] = min(values)
        for key in [k for k in results[0] if k.endswith("_ci")]:
            output[f"{key}_seeds"] = [r[key] for r in results]
    return output


def targets(output: dict, results: list[dict]) -> dict[str, bool]:
    gains = [r["gain"] for r in results]
    return {
        f"median test gain >= +{TARGETS['median_gain']}": statistics.median(gains) >= TARGETS["median_gain"],
        f"every seed's test gain >= +{TARGETS['every_seed_gain']}": min(gains) >= TARGETS["every_seed_gain"],
        f"every control gain < +{TARGETS['control_gain_below']}": max(r["control_gain"] for r in results) < TARGETS["control_gain_below"],
        f"mean paths per execution >= {TARGETS['mean_paths']}": min(r["mean_paths_per_execution"] for r in results) >= TARGETS["mean_paths"],
    }


def plot(results: list[dict], path: Path, mode: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if mode == "main":
        fig, ax = plt.subplots(figsize=(7, 4))
        plot_curves(ax, results)
    else:
        fig, (ax, cost_ax) = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [3, 2]})
        plot_comparison(ax, cost_ax, results, mode)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_curves(ax, results: list[dict]) -> None:
    """The main figures: each seed's test pass rate, RL solid, control dashed, greedy a star."""
    for index, result in enumerate(results):  # one colour per seed
        colour = f"C{index}"
        for name, style, label in (("rl", "-o", "RL"), ("control", "--s", "control (shuffled reward)")):
            curve = result["curve"][name]
            ax.plot(list(curve), list(curve.values()), style, color=colour, markersize=4, label=f"{label}, seed {result['seed']}")
        low, high = result["test_pass_rate_after_ci"]
        ax.errorbar([result["steps"]], [result["test_pass_rate_after"]], yerr=[[result["test_pass_rate_after"] - low],
                    [high - result["test_pass_rate_after"]]], color=colour, capsize=3)
        curve = result["curve"]["greedy"]
        ax.plot(list(curve), list(curve.values()), ":*", color=colour, markersize=10,
                label=f"greedy (temperature 0), seed {result['seed']}")
    ax.set_xlabel("RL step")
    ax.set_ylabel("test pass rate")
    ax.set_title("learn suite (search family): test pass rate, 95% intervals at the end")
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=7)


# What each comparison costs, beside its gains: the trainer's forward+backward seconds per step (replayed side by
# side, so the rollouts sharing the cores do not move it) for the ablation, the run's wall time for the schedulers.
COST = {"ablation": ("replay_fwd_bwd_s_{}", "trainer fwd+bwd s per step (replayed)"),
        "schedulers": ("rl_s_{}", "RL run wall time (s)")}


def plot_comparison(ax, cost_ax, results: list[dict], mode: str) -> None:
    """--ablation / --schedulers: each run's test gain with its interval (left) and what it cost (right)."""
    labels = [k[len("gain_"):] for k in results[0] if k.startswith("gain_") and not k.endswith("_ci")]
    cost_key, cost_label = COST[mode]
    width = 0.8 / len(results)
    for index, result in enumerate(results):
        values = [result[f"gain_{label}"] for label in labels]
        errors = [[v - result[f"gain_{label}_ci"][0] for v, label in zip(values, labels)],
                  [result[f"gain_{label}_ci"][1] - v for v, label in zip(values, labels)]]
        ax.errorbar([i + 0.1 * index for i in range(len(labels))], values, yerr=errors, fmt="o", capsize=4,
                    color=f"C{index}", label=f"seed {result['seed']}")
        cost_ax.bar([i + width * index for i in range(len(labels))], [result[cost_key.format(label)] for label in labels],
                    width=width, color=f"C{index}", label=f"seed {result['seed']}")
    ax.set_xticks(range(len(labels)), labels)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_ylabel("test gain (after - before), 95% interval")
    ax.set_title(f"learn suite: {mode}")
    cost_ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(labels))], labels)
    cost_ax.set_ylabel(cost_label)
    for axis in (ax, cost_ax):
        axis.grid(alpha=0.3)
        axis.legend(frameon=False, fontsize=7)


def seed_folders(seeds: list[int], work_root: Path, cache: Path | None, overrides: list[str],
                 warm_start_seed: int | None) -> list[tuple[int, Path, Path, list[str]]]:
    """Each seed's (seed, work folder, GYRE_CACHE, overrides): with ``warm_start_seed``, ``warm_start.seed`` and one
    cache for all, so the first seed builds the warm start and the others take it from the cache; ``None``, each
    seed its own draw (``warm_start.seed=null``) in a clean cache of its own. ``cache`` names one for all."""
    overrides = [*overrides, f"warm_start.seed={'null' if warm_start_seed is None else warm_start_seed}"]
    if warm_start_seed is not None:
        cache = cache or work_root / "cache"
    return [(seed, work_root / f"seed{seed}", cache or work_root / f"seed{seed}" / "cache", list(overrides)) for seed in seeds]


def warm_start_seed_of(flag: str | None) -> int | None:
    """``--warm-start-seed``: unset, the recipe's pinned draw; ``own``, None (each seed its own); else that seed."""
    if flag is None:
        pinned = recipe()["warm_start"].get("seed")
        return None if pinned is None else int(pinned)
    if flag == "own":
        return None
    try:
        return int(flag)
    except ValueError:
        raise SystemExit(f"--warm-start-seed: {flag!r}; give a seed (an integer) or 'own'") from None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=None, help="RL steps of each run (default: the recipe's)")
    parser.add_argument("--ablation", action="store_true", help="trajectory.max_paths 5 / uncapped / 1 instead of the main figures")
    parser.add_argument("--schedulers", action="store_true", help="elastic / colocate / async instead of the main figures")
    parser.add_argument("--cache", type=Path, default=None, help="reuse this GYRE_CACHE instead of a clean one")
    parser.add_argument("--warm-start-seed", default=None, metavar="S|own",
                        help="the one warm start every seed starts from (default: the recipe's warm_start.seed); "
                             "'own': each seed draws its own")
    parser.add_argument("--work", type=Path, default=None,
                        help="keep the runs here (default: a temporary folder); --ablation and --schedulers reuse its rl runs")
    parser.add_argument("--min-executions", type=int, default=192, help="fewest executions a validation may score")
    parser.add_argument("--test", default=TEST, help="the sealed split validated (a smaller copy for a smoke run)")
    parser.add_argument("--replay-steps", type=int, default=6, help="--ablation: training steps of executions replayed")
    parser.add_argument("--replay-rounds", type=int, default=2, help="--ablation: passes over them under each cap")
    parser.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE",
                        help="extra Hydra overrides of every run (e.g. env.path=... for a smaller suite)")
    args = parser.parse_args()
    if args.ablation and args.schedulers:
        parser.error("--ablation and --schedulers are separate commands: give one of them")
    mode = "ablation" if args.ablation else "schedulers" if args.schedulers else "main"
    steps = int(recipe()["trainer"]["total_steps"]) if args.steps is None else args.steps
    if steps < 1:
        parser.error(f"--steps must be >= 1 (RL steps of each run), got {steps}")
    warm_start_seed = warm_start_seed_of(args.warm_start_seed)
    work_root = args.work or Path(tempfile.mkdtemp(prefix="gyre-learning-"))
    results = []
    for seed, work, cache, overrides in seed_folders(args.seeds, work_root, args.cache, args.override, warm_start_seed):
        work.mkdir(parents=True, exist_ok=True)
        print(f"seed {seed} ({mode}): runs in {work}", flush=True)
        runs = Seed(seed, steps, work, cache, overrides, args.min_executions, args.test)
        if mode == "main":
            result = runs.main()
            print(f"seed {seed}: test pass rate {result['test_pass_rate_before']:.3f} -> {result['test_pass_rate_after']:.3f} "
                  f"(gain {result['gain']:+.3f} [{result['gain_ci'][0]:+.3f}, {result['gain_ci'][1]:+.3f}]); greedy warm start "
                  f"{result['greedy_warm_start_pass_rate']:.3f} -> {result['greedy_pass_rate_after_rl']:.3f} after RL; "
                  f"control {result['control_gain']:+.3f}; paths/execution "
                  f"{result['mean_paths_per_execution']:.2f}; {result['wall_s']:.0f} s", flush=True)
        elif mode == "ablation":
            result = runs.ablation(args.replay_steps, args.replay_rounds)
            print(f"seed {seed}: gain max_paths=5 {result['gain_max_paths_5']:+.3f}, uncapped {result['gain_uncapped']:+.3f}, "
                  f"1 {result['gain_max_paths_1']:+.3f}; fwd+bwd 5/uncapped {result['fwd_bwd_s_ratio_5_vs_uncapped']:.3f} "
                  f"(in the runs {result['fwd_bwd_s_ratio_5_vs_uncapped_in_run']:.3f}); {result['wall_s']:.0f} s", flush=True)
        else:
            result = runs.schedulers()
            print(f"seed {seed}: gain elastic {result['gain_elastic']:+.3f}, colocate {result['gain_colocate']:+.3f}, "
                  f"async {result['gain_async']:+.3f}; {result['wall_s']:.0f} s", flush=True)
        results.append(result)
    keys = [k for k, v in results[0].items() if isinstance(v, (int, float)) and k not in ("seed", "steps")]
    output = summarise(results, keys)
    output["split"] = "test"
    output["warm_start_seed"] = warm_start_seed  # null: each seed its own warm start
    if mode == "main":
        output["curves"] = {str(r["seed"]): r["curve"] for r in results}
        output["targets"] = targets(output, results)
    elif mode == "ablation":
        output["targets"] = {f"fwd+bwd ratio 5 vs uncapped <= {TARGETS['fwd_bwd_ratio']}":
                             max(r["fwd_bwd_s_ratio_5_vs_uncapped"] for r in results) <= TARGETS["fwd_bwd_ratio"]}
    for name, met in output.get("targets", {}).items():
        print(f"target {'met' if met else 'NOT met'}: {name}")
    text = json.dumps(output, indent=1)
    if args.out:
        args.out.write_text(text)
        picture = args.out.with_name("learning_curve.png") if mode == "main" else args.out.with_suffix(".png")
        plot(results, picture, mode)
        print(f"wrote {args.out} and {picture}")
    else:
        print(text)


if __name__ == "__main__":
    main()
