from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from gyre.config import ConfigError, build
from gyre.plots import metric_series, plot_run_curves, plot_timeline
from gyre.tracking import Tracker


def test_tracker_jsonl_and_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with Tracker(tmp_path, backends=["jsonl", "wandb"], project="gyre-test") as tracker:
        tracker.log({"loss": 1.5, "scheduler": "elastic"}, step=1)
        tracker.log({"loss": 1.0}, step=2)
        with pytest.raises(ValueError, match="went backwards: 1 after 2"):
            tracker.log({"loss": 0.5}, step=1)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["loss"]) for r in lines] == [(1, 1.5), (2, 1.0)]
    assert list((tmp_path / "wandb").glob("offline-run-*")), "wandb wrote an offline run"


def test_a_resumed_tracker_continues_the_same_wandb_run(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    with Tracker(tmp_path, backends=["wandb"], wandb_mode="offline"):
        pass
    run_id = (tmp_path / "wandb_id").read_text().strip()
    with Tracker(tmp_path, backends=["wandb"], wandb_mode="offline", resume=True):
        pass
    assert (tmp_path / "wandb_id").read_text().strip() == run_id
    folders = list((tmp_path / "wandb").glob("offline-run-*"))  # offline-run-<time>-<id>[-<n> within a second]
    assert len(folders) == 2 and all(f"-{run_id}" in p.name for p in folders)
    with Tracker(tmp_path, backends=["wandb"], wandb_mode="offline"):  # a fresh run: a new wandb run
        pass
    assert (tmp_path / "wandb_id").read_text().strip() != run_id


def test_run_curves_plot(tmp_path):
    rows = [{"step": 1, "reward/mean": 0.1, "pass_rate": 0.0, "loss": 0.5, "step_time_s": 3.0},
            {"step": 1, "val/step": 1, "val/pass_rate": 0.2},
            {"step": 2, "reward/mean": 0.3, "pass_rate": 0.5, "loss": "nan", "step_time_s": 2.0}]
    assert metric_series(rows, "val/pass_rate") == ([1], [0.2])
    assert metric_series(rows, "loss") == ([1], [0.5])  # non-numbers (a non-finite value logged as text) left out
    assert plot_run_curves(rows, tmp_path / "curves.png").stat().st_size > 1000


def test_timeline_plot(tmp_path):
    path = plot_timeline({"cell0": [(0.0, "rollout"), (2.0, "switching"), (3.0, "train")],
                          "cell1": [(0.0, "rollout")]}, 5.0, tmp_path / "t.png")
    assert path.stat().st_size > 1000


@dataclass
class Example:
    lr: float = 1e-3
    steps: int = 1
    name: str | None = None


def test_config_build_names_unknown_keys_and_wrong_types():
    assert build(Example, {"lr": 1, "steps": 3}, "trainer") == Example(1, 3)
    with pytest.raises(ConfigError, match=r"trainer.stpes: unknown key \(known: lr, name, steps\)"):
        build(Example, {"stpes": 3}, "trainer")
    with pytest.raises(ConfigError, match=r"did you mean trainer.steps\?"):
        build(Example, {"stpes": 3}, "trainer")
    with pytest.raises(ConfigError, match="trainer.steps: expected int, got 'many'"):
        build(Example, {"steps": "many"}, "trainer")
