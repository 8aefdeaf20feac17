"""Intervals of pass rates and gains, and the learning benchmark's refusal of a validation that scored fewer
executions than it planned."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from gyre.trainer.intervals import IncompleteValidation, bootstrap_difference, check_complete, wilson

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


def test_bootstrap_difference_is_reproducible_and_covers_the_true_gain():
    rng = np.random.default_rng(0)
    covered = 0
    for trial in range(40):
        before = (rng.random(192) < 0.3).astype(float)
        after = (rng.random(192) < 0.55).astype(float)
        low, high = bootstrap_difference(after, before, resamples=2000, seed=trial)
        assert low < after.mean() - before.mean() < high
        covered += low <= 0.25 <= high
        assert 0.15 < high - low < 0.22  # about +/- 0.09 at these rates
    assert covered >= 34  # a 95% interval: ~38 of 40 expected
    assert bootstrap_difference([1, 0, 1], [0, 0, 1], seed=3) == bootstrap_difference([1, 0, 1], [0, 0, 1], seed=3)
    with pytest.raises(ValueError, match="both sides"):
        bootstrap_difference([], [1.0])


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
    found = learning.validations(run, minimum=192)
    assert sorted(found) == [0, 16]
    gain, (low, high) = learning.gain(found[16], found[0], seed=0)
    assert gain == 0.0 and low < 0 < high
    write({**row, "val/step": 0}, {**row, "val/step": 16, "val/executions": 191, "val/unscorable": 1,
                                    "val/rewards": row["val/rewards"][:-1]})
    with pytest.raises(IncompleteValidation, match="scored 191 of the 192"):
        learning.validations(run, minimum=192)
    write({**row, "val/step": 0, "val/planned": 96, "val/executions": 96})
    with pytest.raises(IncompleteValidation, match="fewer than --min-executions=192"):
        learning.validations(run, minimum=192)
