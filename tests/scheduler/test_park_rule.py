"""The park rule: a session whose call returned gives back its slot when its predicted tool gap (from its own
earlier gaps) exceeds what restoring it will cost."""

from __future__ import annotations

import numpy as np
import pytest

from gyre.scheduler.parking import ParkRule


def test_the_prediction_is_the_mean_of_the_last_gaps_or_the_prior():
    rule = ParkRule(window=2, prior_s=3.0)
    assert rule.predicted_gap([]) == 3.0
    assert rule.predicted_gap([10.0]) == 10.0
    assert rule.predicted_gap([10.0, 1.0, 2.0]) == 1.5  # only the last two
    assert rule.should_park([], restore_s=2.9) and not rule.should_park([], restore_s=3.0)
    assert not rule.should_park([10.0, 0.1, 0.1], restore_s=0.5)  # short gaps lately: keep the slot
    assert rule.should_park([0.1, 4.0, 4.0], restore_s=0.5)


def test_many_sessions_at_once_decide_as_one_at_a_time():
    """``park_gaps`` (the simulator's batch of executions) makes the router's decision for every gap, from
    that session's earlier gaps only: never a later gap, never another session's."""
    rng = np.random.default_rng(0)
    rule = ParkRule(window=3, prior_s=1.0)
    sessions = [rng.lognormal(0.0, 1.5, size) for size in (1, 5, 2, 9, 1, 4)]
    restores = [rng.uniform(0.2, 3.0, len(gaps)) for gaps in sessions]
    starts = np.cumsum([0] + [len(g) for g in sessions[:-1]])
    batched = rule.park_gaps(np.concatenate(sessions), starts, np.concatenate(restores))
    one_by_one = [rule.should_park(list(gaps[:j]), restore[j])
                  for gaps, restore in zip(sessions, restores) for j in range(len(gaps))]
    assert batched.tolist() == one_by_one
    assert 0 < batched.sum() < len(batched)  # the case exercises both decisions
    assert rule.park_gaps(np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0)).shape == (0,)


def test_bad_rules_and_inputs_are_named():
    with pytest.raises(ValueError, match="window must be >= 1"):
        ParkRule(window=0)
    with pytest.raises(ValueError, match="prior_s must be >= 0"):
        ParkRule(prior_s=-1.0)
    with pytest.raises(ValueError, match="3 gaps but 2 restore costs"):
        ParkRule().park_gaps(np.ones(3), np.array([0]), np.ones(2))
