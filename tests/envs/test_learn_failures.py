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
from gyre.protocol import CallRecord
from gyre.proxy.record_format import encode_record

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "recipes" / "learn" / "tasks"


def left_behind(run: Path, execution: str, version: int, files: dict[str, str], summary: tuple[str, str] | None = None,
                report: tuple[str, str] | None = None) -> None:
    """An execution of ``run`` whose first call was made by ``version`` and whose workspace holds ``files``;
    ``summary``: the (prompt, response) texts of its summary call; ``report``: (the page, the report call a sub-agent
    handed that page made). Records are written as the proxy writes them (a continuing call as a prompt delta)."""
    workspace = run / "executions" / execution / "workspace"
    workspace.mkdir(parents=True)
    for name, content in files.items():
        (workspace / name).write_text(content if content.endswith("\n") else content + "\n")
    tokenizer = load_tokenizer("small")
    ids = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    call = lambda n, agent, prompt, response: CallRecord(  # noqa: E731
        execution, f"{execution}:{n}", agent, prompt, response, [0.0] * len(response), version)
    first = call(0, "main", ids("Task:\nWrite the current value"), ids("<tool_call>"))
    lines = [encode_record(first)]
    if report is not None:
        page, text = report
        task = call(1, "sub", ids(f"Find the current value in {page}."),
                    ids(f'<tool_call>{{"name": "read_file", "arguments": {{"path": "{page}"}}}}</tool_call>'))
        reported = call(2, "sub", [*task.prompt_ids, *task.response_ids, *ids("page text")], ids(text))
        # the proxy writes the report's prompt as a delta: the read call's prompt and response, then the page
        delta = {key: value for key, value in json.loads(encode_record(reported)).items() if key != "prompt_ids"}
        delta["prompt_delta"] = {"parent": task.call_id, "reused": len(task.prompt_ids) + len(task.response_ids),
                                 "ids": ids("page text")}
        lines += [encode_record(task), json.dumps(delta)]
    if summary is not None:
        prompt, response = (ids(text) for text in summary)
        lines.append(encode_record(call(3, "main-summary", prompt, response)))
    (run / "records").mkdir(exist_ok=True)
    (run / "records" / f"{execution}.jsonl").write_text("".join(line + "\n" for line in lines))


def counts(run: Path, split: str, suite: Path) -> dict[str, dict[str, int]]:
    done = subprocess.run([sys.executable, str(ROOT / "recipes" / "learn" / "failures.py"), str(run), "--split", split,
                           "--every", "8", "--suite", str(suite)], capture_output=True, text=True, check=True)
    rows: dict[str, dict[str, int]] = {}
    for line in done.stdout.splitlines():
        if line.startswith("versions"):
            header = line
            rows[header] = {}
        elif line.strip().startswith("the value page's sub-agent reported: "):
            rows[header]["reported"] = {kind: int(n) for kind, n in
                                        (item.split() for item in line.split(": ", 1)[1].split(", "))}
        elif line.strip().startswith("its words, first: "):
            first, second = line.split("first: ", 1)[1].split("; second: ")
            rows[header]["words"] = [{origin: int(n) for origin, n in (item.split() for item in words.split(", "))}
                                     for words in (first, second)]
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
    page = next(name for name, text in pages.items() if "current value" in text)
    run = tmp_path / "run"
    reported = lambda value: (f'<tool_response>\nThe current value is "{value}".\n</tool_response>', f'The current value is "{old}".')  # noqa: E731
    report = lambda text: (page, f'<tool_call>\n{{"name": "report", "arguments": {{"report": "{text}"}}}}\n</tool_call>')  # noqa: E731
    value = lambda v: report(f'The current value is \\"{v}\\".')  # noqa: E731  (escaped in the call's JSON)
    mixed = f"{new.split('-')[0]}-{old.split('-')[1]}"
    swapped = f"{new.split('-')[1]}-{new.split('-')[0]}"
    left_behind(run, f"{task.name}-s0-a", 0, {**pages, out: new}, report=value(new))
    left_behind(run, f"{task.name}-s1-b", 1, {**pages, out: old}, summary=reported(old), report=value(old))
    left_behind(run, f"{task.name}-s2-c", 2, {**pages, out: old}, summary=reported(new), report=value(new))
    left_behind(run, f"{task.name}-s3-d", 3, dict(pages), report=report(f"No current value in {page}."))
    left_behind(run, f"{task.name}-s0-e", 8, {**pages, out: mixed}, report=value(mixed))
    left_behind(run, f"{task.name}-s1-f", 9, {**pages, "page1.txt": new, out: new}, report=value("zzz-yyy"))
    left_behind(run, f"{task.name}-s2-g", 10, {**pages, out: "zzz-yyy"})
    left_behind(run, f"{task.name}-s3-h", 11, {**pages, out: swapped}, report=value(swapped))
    assert counts(run, "dev", SUITE) == {
        "versions 0-7: 4 executions, pass rate 0.250": {
            "search:pass": 1, "search:outdated_from_sub": 1, "search:outdated_from_summary": 1, "search:no_write": 1,
            "reported": {"current": 2, "outdated": 1, "missed": 1},
            "words": [{"current": 2, "outdated": 1}, {"current": 2, "outdated": 1}]},
        # the report's words one by one: the mixed value's second word is the outdated one's, zzz-yyy's are no
        # value's, the swapped value's are the current one's in each other's place
        "versions 8-15: 4 executions, pass rate 0.000": {
            "search:garbled_value": 3, "search:page_changed": 1,
            "reported": {"mixed": 2, "garbled": 1, "none": 1},
            "words": [{"current": 1, "other": 1, "swapped": 1}, {"outdated": 1, "other": 1, "swapped": 1}]},
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
