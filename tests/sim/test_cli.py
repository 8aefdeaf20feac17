"""``python -m gyre.sim`` runs, writes its outputs, and sweeps with Hydra's -m."""

from __future__ import annotations

import json
import subprocess
import sys

SMALL = ["sim.cells=4", "sim.steps=2", "scheduler.batch_size=16", "sim.workload.calls_mean=8"]


def run(args, cwd):
    return subprocess.run([sys.executable, "-m", "gyre.sim", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, check=False)


def test_cli_prints_table_and_writes_json_and_png(tmp_path):
    out = tmp_path / "out"
    proc = run(["+sim=deepswe_122b", *SMALL, f"sim.output.dir={out}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "colocate" in proc.stdout and "elastic_vs_async" in proc.stdout
    doc = json.loads((out / "results.json").read_text())
    assert set(doc["results"]) == {"colocate", "async", "elastic"}
    assert doc["config"]["sim"]["name"] == "deepswe_122b"
    assert (out / "roles.png").stat().st_size > 10_000
    assert (out / "metrics_elastic.jsonl").read_text().count("\n") == 2


def test_cli_sweep_over_cells_staleness_and_path_cap(tmp_path):
    proc = run(["-m", "+sim=deepswe_122b", *SMALL, "sim.steps=1", "sim.policies=[elastic]", "sim.output.png=false",
                "sim.cells=4,6", "scheduler.max_staleness=0,2", "trajectory.max_paths=5,null"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    docs = sorted(tmp_path.glob("runs/sim/sweep_*/*/results.json"))
    assert len(docs) == 8
    seen = {(d["config"]["sim"]["cells"], d["config"]["scheduler"]["max_staleness"],
             d["config"]["trajectory"]["max_paths"]) for d in (json.loads(p.read_text()) for p in docs)}
    assert seen == {(c, s, m) for c in (4, 6) for s in (0, 2) for m in (5, None)}


def test_cli_rejects_an_unknown_key_by_name(tmp_path):
    proc = run(["+sim=deepswe_122b", "+sim.workload.bogus=1"], tmp_path)
    assert proc.returncode != 0
    assert "sim.workload.bogus" in proc.stderr
