"""recipes/learn/failures.py sorts what a run's agents left in their workspaces into the suite's mistakes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "recipes" / "learn" / "tasks" / "train"


def left_behind(run: Path, execution: str, version: int, files: dict[str, str]) -> None:
    """An execution of ``run`` whose first call was made by ``version`` and whose workspace holds ``files``."""
    workspace = run / "executions" / execution / "workspace"
    workspace.mkdir(parents=True)
    for name, content in files.items():
        (workspace / name).write_text(content + "\n")
    (run / "records").mkdir(exist_ok=True)
    (run / "records" / f"{execution}.jsonl").write_text(json.dumps({"weight_version": version}) + "\n")


def first_task(family: str) -> Path:
    return sorted(TRAIN.glob(f"train-{family}-*"))[0]


def test_each_mistake_is_named_and_counted_per_stretch_of_versions(tmp_path):
    run = tmp_path / "run"
    write = first_task("write")
    path, new, old = re.findall(r'"([^"]+)"', (write / "start.md").read_text())
    left_behind(run, f"{write.name}-s0-a", 0, {path: new})
    left_behind(run, f"{write.name}-s1-b", 1, {path: old})
    left_behind(run, f"{write.name}-s2-c", 2, {path: f"{new}-{old}"})
    left_behind(run, f"{write.name}-s3-d", 3, {path.replace(".txt", "s.txt"): new})
    write2 = first_task("write2")
    contents = {p.name: p.read_text().strip() for p in sorted((write2 / "reference").iterdir())}
    first = re.findall(r'"([^"]+)"', (write2 / "start.md").read_text())[0]
    left_behind(run, f"{write2.name}-s0-e", 8, {first: contents[first]})
    left_behind(run, f"{write2.name}-s1-f", 9, {})
    copy = first_task("copy")
    source = next((copy / "workspace").iterdir())
    left_behind(run, f"{copy.name}-s0-g", 9, {source.name: source.read_text().strip()})
    shutil.copytree(copy / "reference", run / "executions" / f"{copy.name}-s1-h" / "workspace", dirs_exist_ok=True)
    (run / "records" / f"{copy.name}-s1-h.jsonl").write_text(json.dumps({"weight_version": 10}) + "\n")

    done = subprocess.run([sys.executable, str(ROOT / "recipes" / "learn" / "failures.py"), str(run),
                           "--split", "train", "--every", "8"], capture_output=True, text=True, check=True)
    rows = {}
    for line in done.stdout.splitlines():
        if line.startswith("versions"):
            header = line
            rows[header] = {}
        else:
            key, count = line.split()
            rows[header][key] = int(count)
    assert rows == {
        "versions 0-7: 4 executions, pass rate 0.250": {
            "write:pass": 1, "write:outdated": 1, "write:garbled_value": 1, "write:missing+wrong_name": 1},
        "versions 8-15: 4 executions, pass rate 0.250": {
            "write2:stopped_early": 1, "write2:missing": 1, "copy:no_write": 1, "copy:pass": 1},
    }
