"""recipes/learn/failures.py sorts what a run's agents left in their workspaces into the suite's mistakes."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from gyre.models import load_tokenizer

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "recipes" / "learn" / "tasks"


def left_behind(run: Path, execution: str, version: int, files: dict[str, str], summary: tuple[str, str] | None = None) -> None:
    """An execution of ``run`` whose first call was made by ``version`` and whose workspace holds ``files``;
    ``summary``: the (prompt, response) texts of its summary call."""
    workspace = run / "executions" / execution / "workspace"
    workspace.mkdir(parents=True)
    for name, content in files.items():
        (workspace / name).write_text(content if content.endswith("\n") else content + "\n")
    lines = [{"weight_version": version, "agent": "main"}]
    if summary is not None:
        tokenizer = load_tokenizer("small")
        prompt, response = (tokenizer.encode(text, add_special_tokens=False) for text in summary)
        lines.append({"weight_version": version, "agent": "main-summary", "prompt_ids": prompt, "response_ids": response})
    (run / "records").mkdir(exist_ok=True)
    (run / "records" / f"{execution}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def counts(run: Path, split: str, suite: Path) -> dict[str, dict[str, int]]:
    done = subprocess.run([sys.executable, str(ROOT / "recipes" / "learn" / "failures.py"), str(run), "--split", split,
                           "--every", "8", "--suite", str(suite)], capture_output=True, text=True, check=True)
    rows: dict[str, dict[str, int]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("versions"):
            header = line
            rows[header] = {}
        else:
            key, count = line.split()
            rows[header][key] = int(count)
    return rows


def test_each_mistake_of_the_search_family_is_named_with_the_role_that_made_it(tmp_path):
    task = sorted((SUITE / "dev").glob("dev-search-*"))[0]
    pages = {p.name: p.read_text() for p in (task / "workspace").iterdir()}
    (out, new), = ((p.name, p.read_text().strip()) for p in (task / "reference").iterdir())
    old = next(re.search(r'"([^"]+)"', line).group(1) for text in pages.values() for line in text.splitlines()
               if line.startswith("outdated"))
    run = tmp_path / "run"
    reported = lambda value: (f'<tool_response>\nThe current value is "{value}".\n</tool_response>', f'The current value is "{old}".')  # noqa: E731
    left_behind(run, f"{task.name}-s0-a", 0, {**pages, out: new})
    left_behind(run, f"{task.name}-s1-b", 1, {**pages, out: old}, summary=reported(old))
    left_behind(run, f"{task.name}-s2-c", 2, {**pages, out: old}, summary=reported(new))
    left_behind(run, f"{task.name}-s3-d", 3, dict(pages))
    left_behind(run, f"{task.name}-s0-e", 8, {**pages, out: f"{new}-{old}"})
    left_behind(run, f"{task.name}-s1-f", 9, {**pages, "page1.txt": new, out: new})
    assert counts(run, "dev", SUITE) == {
        "versions 0-7: 4 executions, pass rate 0.250": {
            "search:pass": 1, "search:outdated_from_sub": 1, "search:outdated_from_summary": 1, "search:no_write": 1},
        "versions 8-15: 2 executions, pass rate 0.000": {"search:garbled_value": 1, "search:page_changed": 1},
    }


def test_the_single_conversation_families_mistakes_are_named(tmp_path):
    spec = importlib.util.spec_from_file_location("learn_make_tasks", ROOT / "recipes" / "learn" / "make_tasks.py")
    make_tasks = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = make_tasks  # dataclasses look their module up
    spec.loader.exec_module(make_tasks)
    suite = tmp_path / "suite"
    make_tasks.generate(suite, {"train": 3, "dev": 0, "test": 0}, ("write", "write2", "copy"), 45, 0)
    first = {family: sorted((suite / "train").glob(f"train-{family}-*"))[0] for family in ("write", "write2", "copy")}
    run = tmp_path / "run"
    write = first["write"]
    path, new, old = re.findall(r'"([^"]+)"', (write / "start.md").read_text())
    left_behind(run, f"{write.name}-s0-a", 0, {path: new})
    left_behind(run, f"{write.name}-s1-b", 1, {path: old})
    left_behind(run, f"{write.name}-s2-c", 2, {path: f"{new}-{old}"})
    left_behind(run, f"{write.name}-s3-d", 3, {path.replace(".txt", "s.txt"): new})
    write2 = first["write2"]
    contents = {p.name: p.read_text().strip() for p in sorted((write2 / "reference").iterdir())}
    file1 = re.findall(r'"([^"]+)"', (write2 / "start.md").read_text())[0]
    left_behind(run, f"{write2.name}-s0-e", 8, {file1: contents[file1]})
    left_behind(run, f"{write2.name}-s1-f", 9, {})
    copy = first["copy"]
    source = next((copy / "workspace").iterdir())
    left_behind(run, f"{copy.name}-s0-g", 9, {source.name: source.read_text().strip()})
    left_behind(run, f"{copy.name}-s1-h", 10, {p.name: p.read_text() for p in (copy / "reference").iterdir()})
    shutil.rmtree(suite / "dev", ignore_errors=True)
    assert counts(run, "train", suite) == {
        "versions 0-7: 4 executions, pass rate 0.250": {
            "write:pass": 1, "write:outdated": 1, "write:garbled_value": 1, "write:missing+wrong_name": 1},
        "versions 8-15: 4 executions, pass rate 0.250": {
            "write2:stopped_early": 1, "write2:missing": 1, "copy:no_write": 1, "copy:pass": 1},
    }
