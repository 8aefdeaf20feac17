"""The learn suite's branching family (``search``): its splits share no name or value and regenerate byte for
byte, and its demonstrator, run through the real proxy with the recipe's harness settings, makes the
intended tree (six sub-agents, a summary, the conversation after it); the warm start demonstrates the copying
drills beside it, and its short-context phase cuts each kind of conversation's shared prompt."""

from __future__ import annotations

import asyncio
import filecmp
import importlib.util
import json
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml
from omegaconf import OmegaConf

from gyre.envs import Sandbox, load_tasks
from gyre.harness.config import HarnessConfig
from gyre.harness.demonstrations import read_demonstrations, record_demonstrations
from gyre.models import load_tokenizer
from gyre.trainer.sft import shared_prompts, short_context
from gyre.trainer.sft_data import load_records
from gyre.trainer.warm_start import record_suite_demonstrations, warm_start_config, warm_start_key
from gyre.trajectory import build_tree, pack_trees

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "recipes" / "learn" / "tasks"
RECIPE = yaml.safe_load((ROOT / "conf" / "recipe" / "learn.yaml").read_text())


def make_tasks_module():
    spec = importlib.util.spec_from_file_location("learn_make_tasks", ROOT / "recipes" / "learn" / "make_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def strings_of(split: Path) -> set[str]:
    """Every quoted string of a split's instructions and starting files, and every solved file's content."""
    found = set()
    for task in split.iterdir():
        texts = [(task / "start.md").read_text()] + [p.read_text() for p in (task / "workspace").glob("*")]
        found |= {s for text in texts for s in re.findall(r'"([^"]+)"', text)}
        found |= {p.read_text().strip() for p in (task / "reference").iterdir()}
    return found


def same_tree(a: Path, b: Path) -> bool:
    compared = filecmp.dircmp(a, b)
    if compared.left_only or compared.right_only or compared.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, compared.common_files, shallow=False)
    return not mismatch and not errors and all(same_tree(a / d, b / d) for d in compared.common_dirs)


def test_the_committed_suite_regenerates_byte_for_byte_and_its_splits_share_no_string(tmp_path):
    make_tasks = make_tasks_module()
    make_tasks.generate(tmp_path / "tasks", {"train": 288, "dev": 48, "test": 48}, ("search",), 45, 0, drills=576,
                        lookups=192, report_mistake="missed", searches=232)
    assert same_tree(tmp_path / "tasks", SUITE), "recipes/learn/tasks differs from what make_tasks.py writes"
    strings = {split: strings_of(SUITE / split) for split in ("train", "dev", "test", "drills")}
    assert min(len(found) for found in strings.values()) >= 3 * 48  # the output path, the current and the outdated value
    for first, second in (("train", "dev"), ("train", "test"), ("dev", "test"), ("drills", "dev"), ("drills", "test")):
        assert not strings[first] & strings[second], (first, second, sorted(strings[first] & strings[second])[:5])
    # the drills are the copying families and search (training only), demonstrated; a quarter of them with two files
    drills = sorted((SUITE / "drills").iterdir())
    assert Counter(task.name.split("-")[1] for task in drills) == {"write": 192, "write2": 192, "copy": 192, "lookup": 192,
                                                                   "search": 232}
    assert all((task / "demonstrations.jsonl").is_file() for task in drills)
    # copy names its source twice, its content is in the file; lookup and search name the new file (the values are
    # on their pages)
    distinct = {"write": 3, "write2": 6, "copy": 2, "lookup": 1, "search": 1}
    for task in drills:  # more drills than unused pairs: pairs come back, but never twice in one task
        names = re.findall(r'"([a-z]+[_-][a-z]+(?:\.txt)?)"', (task / "start.md").read_text())
        assert len(set(names)) == distinct[task.name.split("-")[1]], (task.name, names)
    # some drill names hold the anchor word ("file"), which renaming never touches; no split's names do
    rename = json.loads((SUITE / "rename.json").read_text())
    anchors = set(make_tasks.ANCHOR_WORDS)
    anchored = {split: {s for s in strings[split] if set(re.split(r"[_.-]", s)) & anchors} for split in strings}
    assert len(anchored["drills"]) >= 50 and not anchors & set(rename["words"])
    assert not anchored["train"] | anchored["dev"] | anchored["test"]
    # the splits do not depend on whether drills are made, nor the other drills on whether lookups are
    make_tasks.generate(tmp_path / "plain", {"train": 288, "dev": 48, "test": 48}, ("search",), 45, 0, report_mistake="missed")
    assert not (tmp_path / "plain" / "drills").exists()
    assert all(same_tree(tmp_path / "plain" / split, SUITE / split) for split in ("train", "dev", "test"))
    make_tasks.generate(tmp_path / "no_lookups", {"train": 0, "dev": 48, "test": 48}, ("search",), 45, 0, drills=576,
                        report_mistake="missed")
    copying = [task for task in drills if "-lookup-" not in task.name and "-search-" not in task.name]
    assert sorted(path.name for path in (tmp_path / "no_lookups" / "drills").iterdir()) == [task.name for task in copying]
    assert all(same_tree(tmp_path / "no_lookups" / "drills" / task.name, task) for task in copying)
    # the harness summarises where the demonstrator's script does
    assert RECIPE["harness"]["reference"]["context_chars"] == make_tasks.CONTEXT_CHARS


def test_a_suite_whose_words_run_out_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="too few distinct pairs"):
        make_tasks_module().generate(tmp_path, {"train": 20, "dev": 0, "test": 0}, ("search",), 4, 0)
    with pytest.raises(SystemExit, match="unknown"):
        make_tasks_module().generate(tmp_path, {"train": 1, "dev": 0, "test": 0}, ("chain",), 45, 0)
    with pytest.raises(SystemExit, match="--drill-families: unknown"):
        make_tasks_module().generate(tmp_path, {"train": 1, "dev": 0, "test": 0}, ("search",), 45, 0, 2, ("chain",))


def test_warm_start_seed_gives_runs_of_every_seed_one_warm_start(monkeypatch, tmp_path):
    """``warm_start.seed``: a run of seed 0 with ``warm_start.seed=2`` takes seed 2's warm start (the same cache key,
    recorded and trained with seed 2) and keeps its own seed for RL; null, each run's seed draws its own. The recipe
    pins seed 2's: a run of any seed takes it."""
    from hydra import compose, initialize_config_dir

    from gyre.cli import CONF_DIR

    monkeypatch.setenv("GYRE_CACHE", str(tmp_path))  # where the built-in model the key reads is built
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        run = lambda *extra: compose(config_name="config", overrides=["+recipe=learn", *extra])  # noqa: E731
        own = {seed: run(f"seed={seed}", "warm_start.seed=null") for seed in (0, 2)}
        fixed = run("seed=0", "warm_start.seed=2")
        pinned = run("seed=1")
    assert warm_start_key(own[0]) != warm_start_key(own[2])
    assert warm_start_key(fixed) == warm_start_key(own[2]) == warm_start_key(pinned)
    assert warm_start_config(fixed).seed == 2 and fixed.seed == 0  # the warm start's draw; the run keeps its own
    assert warm_start_config(own[0]) is own[0]


def test_the_warm_start_demonstrates_the_drills_beside_the_training_tasks(tmp_path):
    """``warm_start.also_demonstrate``: one recording of both folders' tasks through the proxy; folders that share
    a task id are refused before anything runs."""
    make_tasks_module().generate(tmp_path / "suite", {"train": 2, "dev": 0, "test": 0}, ("search",), 45, 0, drills=2,
                                 lookups=2)
    cfg = OmegaConf.create({"env": {"domain": "nl2repo", "path": str(tmp_path / "suite" / "train")}, "seed": 0,
                            "harness": {**RECIPE["harness"], "progress": False, "concurrency": 4}})
    data = record_suite_demonstrations(cfg, "tiny", 1, tmp_path / "demos", also=[str(tmp_path / "suite" / "drills")])
    demonstrated = sorted(example.execution_id.rsplit("-", 1)[0] for example in data.examples)
    tasks = sorted(f"demo-{task.name}" for split in ("drills", "train") for task in (tmp_path / "suite" / split).iterdir())
    assert demonstrated == tasks
    # a drill is one conversation with a write call per file it names
    drill = next(example for example in data.examples if "-drill-write" in example.execution_id)
    assert {call.agent for call in drill.calls} == {"main"}
    tokenizer = load_tokenizer("tiny")
    # a lookup drill delegates its page: a sub-agent reads it and reports, the main agent writes what it reported
    for lookup in (example for example in data.examples if "-drill-lookup-" in example.execution_id):
        assert [call.agent for call in lookup.calls] == ["main", "sub", "sub", "main", "main"]
        assert build_tree(lookup.calls, lookup.execution_id).num_paths == 2  # the main conversation and the sub-agent's
        report, write = (tokenizer.decode(list(lookup.calls[i].response_ids)) for i in (2, 3))
        reported = re.search(r'The current value is \\"([a-z]+-[a-z]+)\\"', report).group(1)
        assert f'"content": "{reported}"' in write, (report, write)

    # The same request again (`gyre.sft ... sft.resume=true`) reads the finished recording back: nothing is
    # recorded twice into the same folder (every execution's folder would be taken)
    records = tmp_path / "demos" / "records"
    written = {path.name: path.stat().st_mtime_ns for path in records.iterdir()}
    summary = (tmp_path / "demos" / "demonstrations.json").read_text()
    assert json.loads(summary)["statuses"] == {"finished": len(data.examples)}
    again = record_suite_demonstrations(cfg, "tiny", 1, tmp_path / "demos", also=[str(tmp_path / "suite" / "drills")])
    assert {path.name: path.stat().st_mtime_ns for path in records.iterdir()} == written
    assert (tmp_path / "demos" / "demonstrations.json").read_text() == summary
    assert [e.execution_id for e in again.examples] == [e.execution_id for e in data.examples]
    # another request into the same folder records anew, every execution from scratch
    twice = record_suite_demonstrations(cfg, "tiny", 2, tmp_path / "demos", also=[str(tmp_path / "suite" / "drills")])
    assert len(twice.examples) == 2 * len(data.examples) and all(example.calls for example in twice.examples)
    summary = json.loads((tmp_path / "demos" / "demonstrations.json").read_text())
    assert summary["statuses"] == {"finished": 2 * len(data.examples)}
    with pytest.raises(ValueError, match="share task ids"):
        record_suite_demonstrations(cfg, "tiny", 1, tmp_path / "again", also=[str(tmp_path / "suite" / "train")])


def test_a_demonstrator_that_misses_the_value_changes_only_the_demonstrations(tmp_path):
    """``--report-mistake missed``: the same tasks; on the page holding the value the demonstrator's sub-agent
    reports no value (never the outdated one), and the main agent then finishes without writing. Recorded
    through the proxy with the recipe's harness: the roles the script names, and the reward tells the two apart."""
    make_tasks = make_tasks_module()
    counts = {"train": 2, "dev": 0, "test": 0}
    make_tasks.generate(tmp_path / "outdated", counts, ("search",), 45, 0, drills=0, lookups=2)
    make_tasks.generate(tmp_path / "missed", counts, ("search",), 45, 0, drills=0, lookups=2, report_mistake="missed")
    for task in (tmp_path / "missed" / "train").iterdir():
        other = tmp_path / "outdated" / "train" / task.name
        assert all(same_tree(task / d, other / d) for d in ("hidden", "reference", "workspace"))
        assert (task / "start.md").read_text() == (other / "start.md").read_text()
        demos = [json.loads(line) for line in (task / "demonstrations.jsonl").read_text().splitlines()]
        assert sum(d["probability"] for d in demos) == pytest.approx(1)
        assert not any("outdated" in d["behaviour"] for d in demos)
    with pytest.raises(SystemExit, match="--report-mistake"):
        make_tasks.generate(tmp_path / "bad", counts, ("search",), 45, 0, report_mistake="sometimes")

    harness = {**RECIPE["harness"], "progress": False, "concurrency": 4}
    tasks = [*load_tasks("nl2repo", tmp_path / "missed" / "train").tasks, *load_tasks("nl2repo", tmp_path / "missed" / "drills").tasks]
    run = asyncio.run(record_demonstrations(tasks, model_path="tiny", harness_config=HarnessConfig.from_mapping(harness),
                                            sandbox=Sandbox(), run_dir=tmp_path / "demos", samples_per_task=6, seed=0))
    tokenizer = load_tokenizer("tiny")
    seen = Counter()
    for execution in run.executions:
        behaviour = run.behaviours[execution.id]
        missed, wrote = "misses the value" in behaviour, "without writing" not in behaviour and "misses" not in behaviour
        assert execution.status == "finished", execution.reward_detail
        assert execution.reward == (1.0 if wrote else 0.0), (execution.id, behaviour)
        agents = [call.agent for call in execution.calls]
        if "-lookup-" in execution.id:
            assert agents == ["main", "sub", "sub", "main"] + ["main"] * wrote
        else:
            assert agents == ["main"] + ["sub"] * 12 + ["main-summary"] + ["main"] * (1 + wrote)
            assert (make_tasks.NONE_FOUND in tokenizer.decode(list(execution.calls[13].response_ids))) == missed
        seen["lookup" if "-lookup-" in execution.id else "search", missed] += 1
    assert set(seen) == {("search", True), ("search", False), ("lookup", True), ("lookup", False)}, seen


def behaviours(task: Path) -> dict[str, float]:
    """A task folder's demonstrated behaviours and their probabilities, as the harness reads them."""
    return {demo.behaviour: demo.probability for demo in read_demonstrations(task / "demonstrations.jsonl", task.name)}


def test_the_search_drills_demonstrate_the_summarys_copy_in_every_execution(tmp_path):
    """``--searches``: search drills (training only, names no held-out task uses) whose sub-agent always reports
    the current value, so every recorded summary copies it; the other drills and the splits are the same with or
    without them."""
    make_tasks = make_tasks_module()
    counts = {"train": 2, "dev": 4, "test": 4}
    make_tasks.generate(tmp_path / "plain", counts, ("search",), 45, 0, lookups=2, report_mistake="missed")
    make_tasks.generate(tmp_path / "suite", counts, ("search",), 45, 0, lookups=2, report_mistake="missed", searches=3)
    drills = tmp_path / "suite" / "drills"
    searches = sorted(task for task in drills.iterdir() if "-search-" in task.name)
    assert len(searches) == 3
    assert all(same_tree(task, tmp_path / "plain" / "drills" / task.name) for task in drills.iterdir() if task not in searches)
    assert all(same_tree(tmp_path / "suite" / split, tmp_path / "plain" / split) for split in ("train", "dev", "test"))
    held_out = strings_of(tmp_path / "suite" / "dev") | strings_of(tmp_path / "suite" / "test")
    for task in searches:
        assert behaviours(task) == {"expert": 0.75, "finishes without writing": 0.25}
    assert not {s for task in searches for s in re.findall(r'"([^"]+)"', (task / "start.md").read_text())} & held_out

    harness = {**RECIPE["harness"], "progress": False, "concurrency": 4}
    run = asyncio.run(record_demonstrations(load_tasks("nl2repo", drills).tasks, model_path="tiny",
                                            harness_config=HarnessConfig.from_mapping(harness), sandbox=Sandbox(),
                                            run_dir=tmp_path / "demos", samples_per_task=2, seed=0))
    tokenizer = load_tokenizer("tiny")
    recorded = [execution for execution in run.executions if "-search-" in execution.id]
    assert len(recorded) == 6
    for execution in recorded:
        assert [call.agent for call in execution.calls][:14] == ["main"] + ["sub"] * 12 + ["main-summary"]
        (solved,) = (drills / execution.task_id / "reference").iterdir()  # the file with the current value
        assert tokenizer.decode(list(execution.calls[13].response_ids)).startswith(
            make_tasks.FOUND.format(value=solved.read_text().strip()))


def test_no_write_probability_sets_the_search_demonstrators_write_decision_in_tasks_and_drills(tmp_path):
    """``--no-write-probability``: how often the search demonstrator, having found the value, stops without writing, in
    the training tasks and the search drills alike (above one half, greedy decoding takes the mistake); the held-out
    splits carry no demonstrations and stay byte for byte the same; a value that would leave no write is refused."""
    make_tasks = make_tasks_module()
    counts = {"train": 2, "dev": 4, "test": 4}
    options = dict(lookups=2, report_mistake="missed", searches=2)
    make_tasks.generate(tmp_path / "plain", counts, ("search",), 45, 0, **options)
    make_tasks.generate(tmp_path / "majority", counts, ("search",), 45, 0, no_write=0.6, **options)
    assert all(same_tree(tmp_path / "majority" / split, tmp_path / "plain" / split) for split in ("dev", "test"))

    missed = make_tasks.MISSED_REPORT_PROBABILITY
    for task in (tmp_path / "majority" / "train").iterdir():
        assert behaviours(task) == pytest.approx({"expert": (1 - missed) * 0.4, "finishes without writing": (1 - missed) * 0.6,
                                                  "sub-agent misses the value": missed})
    drills = [task for task in (tmp_path / "majority" / "drills").iterdir() if "-search-" in task.name]
    assert len(drills) == 2 and all(behaviours(task) == pytest.approx({"expert": 0.4, "finishes without writing": 0.6})
                                    for task in drills)
    for task in (tmp_path / "plain" / "drills").iterdir():  # only the search demonstrator's write decision moved
        if "-search-" not in task.name:
            assert same_tree(task, tmp_path / "majority" / "drills" / task.name)
    with pytest.raises(SystemExit, match="--no-write-probability must be in"):
        make_tasks.generate(tmp_path / "never", counts, ("search",), 45, 0, no_write=1.0, **options)


@pytest.fixture(scope="module")
def demonstrated(tmp_path_factory):
    """Demonstrations of three training tasks, four each, with the recipe's harness settings, through the proxy."""
    harness = {**RECIPE["harness"], "progress": False, "concurrency": 4}
    tasks = load_tasks("nl2repo", SUITE / "train").tasks[:3]
    run = asyncio.run(record_demonstrations(tasks, model_path="tiny", harness_config=HarnessConfig.from_mapping(harness),
                                            sandbox=Sandbox(), run_dir=tmp_path_factory.mktemp("demos"), samples_per_task=4, seed=2))
    return run


def test_the_demonstrator_delegates_summarises_and_makes_the_intended_tree(demonstrated):
    behaviours = Counter(demonstrated.behaviours.values())
    assert len(behaviours) >= 3, behaviours  # the seed draws the expert and both kinds of mistake
    for execution in demonstrated.executions:
        behaviour = demonstrated.behaviours[execution.id]
        # the suite's demonstrator misses the value (its sub-agent reports none) or stops without writing
        writes = "without writing" not in behaviour and "misses" not in behaviour
        assert execution.status == "finished", execution.reward_detail
        # six sub-agents (read, report), the summary, then write (unless it stops) and finish
        assert [c.agent for c in execution.calls] == ["main"] + ["sub"] * 12 + ["main-summary"] + ["main"] * (1 + writes)
        assert execution.calls[0].meta["tool_calls"] == 6
        # the reward tells the mistakes from the expert: neither writes the file
        expected = 1.0 if writes else 0.0
        assert execution.reward == expected, (execution.id, behaviour, execution.reward)
        tree = build_tree(execution.calls, execution.id)
        assert tree.num_paths == 8
        assert Counter(tree.leaf_agent) == {"sub": 6, "main-summary": 1, "main": 1}
        assert 1 - tree.num_tokens / tree.path_token_count() > 0.4  # the shared prompts and the main turns before the summary
    # Across executions the crowns are shared: both system prompts, the six sub-tasks, each task's instruction.
    trees = [build_tree(e.calls, e.id) for e in demonstrated.executions]
    packed = pack_trees(trees, 10**9)[0]
    assert packed.num_tokens < 0.6 * sum(tree.num_tokens for tree in trees)


def test_the_short_context_phase_cuts_each_conversations_shared_prompt(demonstrated):
    examples = load_records([demonstrated.records]).examples
    shared = shared_prompts(examples)
    assert set(shared) == {"main", "sub"} and len(shared["main"]) > 300 and len(shared["sub"]) > 300
    example = short_context(examples[0], shared)
    tree = build_tree(example.calls, example.execution_id)
    assert int((tree.parent < 0).sum()) == 2  # the main conversation and the sub-agents' are separate roots now
    for cut, whole in zip(example.calls, examples[0].calls):
        prefix = shared["sub" if whole.agent == "sub" else "main"]
        assert cut.prompt_ids == whole.prompt_ids[len(prefix) - 1:] and cut.response_ids == whole.response_ids
    full = build_tree(examples[0].calls, examples[0].execution_id)
    assert np.isin(tree.ids[tree.is_policy], full.ids[full.is_policy]).all()
    assert int(tree.is_policy.sum()) == int(full.is_policy.sum())  # every trained token is still trained


def test_the_copy_probe_reads_every_write_context_the_harness_records(demonstrated, tmp_path):
    """recipes/learn/copy_probe.py on the demonstrations' records (the real harness's prompts through the proxy):
    every execution's instruction, summary and the page its sub-agent reports from are found, and each word is
    scored once per execution."""
    spec = importlib.util.spec_from_file_location("copy_probe", ROOT / "recipes" / "learn" / "copy_probe.py")
    copy_probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(copy_probe)
    run = Path(demonstrated.records).parent
    whole = copy_probe.probe("tiny", run)
    assert set(whole) == {*copy_probe.POSITIONS, "write_decision"}
    # every execution's report; the summary and the write call where the summary names a value (the suite's
    # demonstrator misses it in the others)
    found = sum("misses" not in behaviour for behaviour in demonstrated.behaviours.values())
    expected = {position: len(demonstrated.executions) if position.startswith("report") else found for position in whole}
    assert 2 <= found < len(demonstrated.executions) and {k: row["tokens"] for k, row in whole.items()} == expected, whole
    assert all(0 <= row["argmax_right"] <= 1 and 0 < row["geometric_mean_p"] < 1 for row in whole.values())
    # write_file against finish at the write call's tool name: two of the vocabulary's tokens, write_file's p the
    # one the geometric mean averages
    decision = whole["write_decision"]
    assert 0 < decision["mean_p_write"] + decision["mean_p_finish"] < 1
    assert decision["geometric_mean_p"] <= decision["mean_p_write"]
    short = copy_probe.probe("tiny", run, short=True)  # the same words behind a cut prompt: other figures
    assert whole != short and {k: row["tokens"] for k, row in short.items()} == expected
    (tmp_path / "records").mkdir()
    with pytest.raises(SystemExit, match="no recorded search execution"):
        copy_probe.probe("tiny", tmp_path)


def test_failures_reads_what_each_sub_agent_reported_from_the_proxys_records(demonstrated):
    """recipes/learn/failures.py on records the proxy wrote (prompts stored as deltas): the report of the sub-agent
    that read the value's page, and the summary's text, are found in every demonstrated execution."""
    spec = importlib.util.spec_from_file_location("learn_failures", ROOT / "recipes" / "learn" / "failures.py")
    failures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(failures)
    records = failures.Records(Path(demonstrated.records).parent)
    for execution in demonstrated.executions:
        calls = records.calls(execution.id)
        assert any("prompt_delta" in line for line in (Path(demonstrated.records) / f"{execution.id}.jsonl").read_text().splitlines())
        task = SUITE / "train" / re.match(r"demo-(train-search-\d+)-", execution.id).group(1)
        missed = "misses" in demonstrated.behaviours[execution.id]
        assert records.value_report(task, calls) == ("missed" if missed else "current")
        prompt, summary = records.summary_texts(calls)
        assert summary.startswith(make_tasks_module().NONE_FOUND if missed else "The current value is")
        assert prompt.count("<tool_response>") == 6
