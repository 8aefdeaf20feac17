"""Intervals of pass rates and gains, and the learning benchmark's refusal of a validation that scored fewer
executions than it planned."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from gyre.trainer.intervals import (
    IncompleteValidation,
    bootstrap_paired_by_task,
    check_complete,
    pass_rate_interval,
    wilson,
)

ROOT = Path(__file__).resolve().parents[2]


def benchmark():
    spec = importlib.util.spec_from_file_location("learning_benchmark", ROOT / "benchmarks" / "learning.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_wilson_matches_the_textbook_values_and_stays_inside_zero_one():
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)  # not the zero-width normal interval
    low, high = wilson(192, 192)
    assert high == 1.0 and 0.97 < low < 1.0
    # 192 executions near 0.3: about +/- 0.065, the figure the recipe README quotes
    low, high = wilson(58, 192)
    assert 0.12 < high - low < 0.14
    with pytest.raises(ValueError, match="at least one execution"):
        wilson(0, 0)
    with pytest.raises(ValueError, match="passes must be in"):
        wilson(11, 10)


def validation(rng: np.random.Generator, rates: np.ndarray, samples: int) -> tuple[np.ndarray, list[str]]:
    """``samples`` executions of each task, task ``t`` passing with probability ``rates[t]``, in task order."""
    passed = (rng.random((rates.size, samples)) < rates[:, None]).astype(float).ravel()
    return passed, [f"t{index // samples}" for index in range(passed.size)]


def test_the_paired_task_bootstrap_is_reproducible_and_covers_the_true_gain():
    """48 tasks of unequal difficulty, 4 executions each, drawn afresh from a population in every trial:
    the interval covers the population's gain (+0.2) about 95% of the time, and is no narrower than the
    spread between task sets allows."""
    rng = np.random.default_rng(0)
    covered, widths = 0, []
    for trial in range(40):
        difficulty = rng.uniform(0.0, 0.6, 48)  # each task's pass rate before; RL adds 0.2 to every task
        before, tasks = validation(rng, difficulty, 4)
        after, _ = validation(rng, difficulty + 0.2, 4)
        low, high = bootstrap_paired_by_task(after, tasks, before, tasks, resamples=2000, seed=trial)
        assert low < after.mean() - before.mean() < high
        covered += low <= 0.2 <= high
        widths.append(high - low)
    assert covered >= 34, covered  # a 95% interval: ~38 of 40 expected
    assert 0.12 < np.median(widths) < 0.22, np.median(widths)
    assert bootstrap_paired_by_task([1, 0], ["a", "b"], [0, 0], ["a", "b"], seed=3) == bootstrap_paired_by_task(
        [1, 0], ["a", "b"], [0, 0], ["a", "b"], seed=3)


def test_the_paired_task_bootstrap_sees_the_spread_between_tasks():
    """Half the tasks always pass, half never, on both sides: no gain and no doubt about the executions
    (every one is certain), but which tasks a set holds moves both sides together; pairing cancels that, so
    the interval is exactly zero width. Tasks that gain unevenly widen it."""
    tasks = [f"t{i // 4}" for i in range(192)]
    fixed = [float(i // 4 < 24) for i in range(192)]
    assert bootstrap_paired_by_task(fixed, tasks, fixed, tasks, resamples=500) == (0.0, 0.0)
    uneven = [float(i // 4 < 36) for i in range(192)]  # 12 tasks went from never to always
    low, high = bootstrap_paired_by_task(uneven, tasks, fixed, tasks, resamples=2000)
    assert low < 0.25 < high and 0.1 < high - low < 0.3  # 12 of 48 tasks: a task-level count, not 48 executions
    with pytest.raises(ValueError, match="same tasks on both sides: 2 tasks are on one side only"):
        bootstrap_paired_by_task([1.0], ["a"], [1.0], ["b"])


def test_greedy_copies_count_once_in_a_pass_rate_interval():
    """Greedy decoding repeats an execution: 4 copies of 48 tasks are 48 observations, and the interval
    says so; at temperature 1 (a task's repeats differ) it is over the executions."""
    tasks = [f"t{i // 4}" for i in range(192)]
    greedy = [float(i // 4 < 24) for i in range(192)]
    assert pass_rate_interval(greedy, tasks) == wilson(24, 48)
    assert pass_rate_interval(greedy) == wilson(96, 192)  # without the tasks: every execution counts
    sampled = [float(i % 2) for i in range(192)]  # each task passed 2 of its 4
    assert pass_rate_interval(sampled, tasks) == wilson(96, 192)
    once = [f"t{i}" for i in range(48)]  # one execution per task: nothing to collapse
    assert pass_rate_interval(greedy[::4], once) == wilson(24, 48)


def test_a_validation_that_scored_fewer_executions_than_planned_is_refused():
    complete = {"val/step": 8, "val/planned": 192, "val/executions": 192, "val/unscorable": 0}
    check_complete(complete, "run")
    with pytest.raises(IncompleteValidation, match="scored 190 of the 192 executions it planned"):
        check_complete({**complete, "val/executions": 190, "val/unscorable": 2}, "run")
    with pytest.raises(IncompleteValidation, match="does not say how many"):
        check_complete({"val/step": 0, "val/pass_rate": 0.5}, "run")


def test_the_learning_benchmark_stops_on_a_short_or_small_validation(tmp_path):
    learning = benchmark()
    row = {"val/pass_rate": 0.5, "val/passes": 96, "val/executions": 192, "val/planned": 192, "val/unscorable": 0,
           "val/rewards": [1.0] * 96 + [0.0] * 96}
    run = tmp_path / "run"
    run.mkdir()

    def write(*rows: dict) -> None:
        (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write({**row, "val/step": 0}, {"reward/mean": 0.4, "step": 1}, {**row, "val/step": 16})
    found = learning.validations(run, minimum=192, tasks=[f"test-{t:03d}" for t in range(48)])
    assert sorted(found) == [0, 16]
    gain, (low, high) = learning.gain(found[16], found[0], seed=0)
    assert gain == 0.0 and low == high == 0.0  # the same tasks passed: paired by task, nothing moved
    # a run from before validations logged their tasks: its rewards are in task order, 4 a task
    assert learning.task_ids(found[0])[:5] == ["test-000"] * 4 + ["test-001"]
    assert learning.rate(found[0])[1] == list(wilson(24, 48))  # each task's 4 agree: the copies count once
    # a finished run is reused only if it was made with the very overrides the benchmark would pass
    (run / ".hydra").mkdir()
    made = learning.job_overrides(run, 0, 16, ["trainer.val_every=16"])
    (run / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in made))
    assert learning.finished(run, 16, 192, made)
    assert not learning.finished(run, 16, 192, learning.job_overrides(run, 0, 16, ["trainer.val_every=16", "trainer.lr=1e-4"]))
    assert not learning.finished(run, 48, 192, learning.job_overrides(run, 0, 48, ["trainer.val_every=16"]))
    tasks = [f"t{i % 48}" for i in range(192)]  # the same passes spread over the tasks: 2 of each task's 4
    write({**row, "val/step": 0, "val/task_ids": tasks})
    assert learning.rate(learning.validations(run, minimum=192)[0])[1] == list(wilson(96, 192))
    write({**row, "val/step": 0}, {**row, "val/step": 16, "val/executions": 191, "val/unscorable": 1,
                                    "val/rewards": row["val/rewards"][:-1]})
    with pytest.raises(IncompleteValidation, match="scored 191 of the 192"):
        learning.validations(run, minimum=192)
    write({**row, "val/step": 0, "val/planned": 96, "val/executions": 96})
    with pytest.raises(IncompleteValidation, match="fewer than --min-executions=192"):
        learning.validations(run, minimum=192)


def test_one_warm_start_for_every_seed_is_one_cache_and_one_warm_start_seed(tmp_path):
    """``--warm-start-seed``: the seeds' runs share a cache and name the warm start's seed (so the first builds it
    and the rest reuse it: tests/trainer/test_learn_suite.py checks the key); ``own``, each seed has its own."""
    module = benchmark()
    plan = module.seed_folders
    own = plan([0, 1], tmp_path, None, ["cluster.cells=2"], None)
    assert [(seed, work) for seed, work, _, _ in own] == [(0, tmp_path / "seed0"), (1, tmp_path / "seed1")]
    assert own[0][2] != own[1][2] and all(overrides == ["cluster.cells=2", "warm_start.seed=null"] for *_, overrides in own)
    shared = plan([0, 1], tmp_path, None, ["cluster.cells=2"], 2)
    assert shared[0][2] == shared[1][2] == tmp_path / "cache"
    assert all(overrides == ["cluster.cells=2", "warm_start.seed=2"] for *_, overrides in shared)
    assert {cache for _, _, cache, _ in plan([0, 1], tmp_path, tmp_path / "mine", [], 2)} == {tmp_path / "mine"}
    # the flag: unset, the recipe's pinned draw; "own"; a seed; anything else names itself
    assert module.warm_start_seed_of(None) == module.recipe()["warm_start"]["seed"] == 2
    assert module.warm_start_seed_of("own") is None and module.warm_start_seed_of("5") == 5
    with pytest.raises(SystemExit, match="--warm-start-seed: 'two'"):
        module.warm_start_seed_of("two")


def test_ablation_and_schedulers_reuse_the_main_figures_rl_run(tmp_path, monkeypatch):
    """``--ablation`` and ``--schedulers`` in the main figures' ``--work`` take its rl run as their max_paths=5 /
    elastic run (the recipe's cap and scheduler: conf/trajectory/default.yaml, conf/recipe/learn.yaml) and run only
    the others. Once the ablation passed ``trajectory.max_paths=5`` to it, which no finished rl run was made with,
    so it ran the recipe again over the main figures' own folder."""
    import yaml

    learning = benchmark()
    assert yaml.safe_load((ROOT / "conf/trajectory/default.yaml").read_text())["max_paths"] == 5
    assert "- scheduler: elastic" in (ROOT / "conf/config.yaml").read_text()  # and the recipe keeps it
    learn = yaml.safe_load((ROOT / "conf/recipe/learn.yaml").read_text())
    assert not any("scheduler" in str(entry) for entry in learn["defaults"]) and "name" not in learn["scheduler"]
    row = {"val/pass_rate": 0.5, "val/passes": 96, "val/executions": 192, "val/planned": 192, "val/unscorable": 0,
           "val/rewards": [1.0] * 96 + [0.0] * 96}
    seed = learning.Seed(0, 24, tmp_path, tmp_path / "cache", ["warm_start.seed=2"], 192)
    main_rl = tmp_path / "rl"  # as the main figures leave it
    (main_rl / ".hydra").mkdir(parents=True)
    made = learning.job_overrides(main_rl, 0, 24, [*seed.common, "trainer.val_every=24"])
    (main_rl / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(made))
    (main_rl / "metrics.jsonl").write_text("".join(json.dumps({**row, "val/step": s}) + "\n" for s in (0, 24)))
    ran = []

    class WouldRun(Exception):
        pass

    def run_job(run_dir, *_):
        ran.append(run_dir.name)
        raise WouldRun(run_dir.name)

    monkeypatch.setattr(learning, "run_job", run_job)
    for runs in (learning.ABLATION_RUNS, seed.scheduler_runs()):
        (name, extra), *others = runs.values()
        rows, _ = seed.rl(name, extra)
        assert sorted(rows) == [0, 24]
        for name, extra in others:
            with pytest.raises(WouldRun):
                seed.rl(name, extra)
    assert ran == ["rl_uncapped", "rl_max_paths_1", "rl_colocate", "rl_async"]
    assert "scheduler=async" in seed.scheduler_runs()["async"][1]


def test_the_ablation_and_scheduler_pictures_show_each_runs_gain_and_cost(tmp_path):
    """``--ablation`` / ``--schedulers`` write ``<out>.png``: each run's gain with its interval beside its cost (the
    replayed fwd+bwd seconds, the run's wall time); a result missing a run's cost is an error, not a blank bar."""
    learning = benchmark()
    labels = {"ablation": ("max_paths_5", "uncapped", "max_paths_1"), "schedulers": ("elastic", "colocate", "async")}
    for mode, runs in labels.items():
        cost_key = learning.COST[mode][0]
        result = {"seed": 0, "steps": 24}
        for index, label in enumerate(runs):
            result.update({f"gain_{label}": 0.1 * index, f"gain_{label}_ci": [0.1 * index - 0.05, 0.1 * index + 0.05],
                           cost_key.format(label): 10.0 + index})
        learning.plot([result, {**result, "seed": 1}], tmp_path / f"{mode}.png", mode)
        assert (tmp_path / f"{mode}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        del result[cost_key.format(runs[-1])]
        with pytest.raises(KeyError, match=runs[-1]):
            learning.plot([result], tmp_path / "broken.png", mode)
