"""``cluster.kill_cells`` entries: a mistake in one is a clear error naming it, before anything starts."""

from __future__ import annotations

import pytest

from gyre.trainer.faults import FaultPlan

CELLS, WORKERS = ["cell0", "cell1"], ["worker0", "worker1"]


def test_entries_of_each_kind_parse():
    plan = FaultPlan([{"cell": "cell1", "step": 2, "during": "rollout"}, {"cell": "cell0", "step": 1},
                      {"worker": "worker1", "step": 3}], CELLS, WORKERS)
    assert [(k.cell, k.step, k.during) for k in plan.kills] == [
        ("cell1", 2, "rollout"), ("cell0", 1, "step"), ("worker1", 3, "worker")]
    assert plan.missed() == [{"cell": "cell1", "step": 2, "during": "rollout"}, {"cell": "cell0", "step": 1, "during": "step"},
                             {"cell": "worker1", "step": 3, "during": "worker"}]


@pytest.mark.parametrize("entry, names", [
    ({"cell": "cell7", "step": 1}, "no cell 'cell7'"),
    ({"cell": "cell0", "step": 1, "during": "lunch"}, "during is one of"),
    ({"cell": "cell0", "step": 0}, "step >= 1"),
    ({"cell": "cell0"}, "expected {cell"),
    ({"cell": "cell0", "step": 1, "when": "now"}, "expected {cell"),
    ({"worker": "worker2", "step": 1}, "no execution worker 'worker2'"),
    ({"worker": "worker0", "step": 1, "during": "step"}, "expected {worker"),
    ("cell0", "expected {cell"),
    ({"cell": "cell0", "step": "two"}, "step is a step number"),
])
def test_a_broken_entry_is_named(entry, names):
    with pytest.raises(ValueError, match=names.replace("{", r"\{")) as raised:
        FaultPlan([entry], CELLS, WORKERS)
    assert "kill_cells" in str(raised.value)


def test_workers_only_where_there_are_execution_nodes():
    with pytest.raises(ValueError, match=r"workers are \[\].*cluster.execution_nodes"):
        FaultPlan([{"worker": "worker0", "step": 1}], CELLS)
