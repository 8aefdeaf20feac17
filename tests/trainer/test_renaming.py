"""Renaming the learn suite's words in demonstrations (sft.rename_file): the renamed conversation is what the
renamed task records through the real proxy, held-out names are never produced, and SFT with it resumes."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import re
import shutil
import sys
from pathlib import Path

import pytest

from gyre.envs import Sandbox, load_tasks
from gyre.harness.config import HarnessConfig
from gyre.harness.demonstrations import record_demonstrations
from gyre.models import load_tokenizer
from gyre.trainer.renaming import Renaming, RenamingError
from gyre.trainer.sft import SFTConfig, SFTTrainer, demonstration_trees
from gyre.trainer.sft_data import load_records
from gyre.trajectory.sharing import common_prefix_length

ROOT = Path(__file__).resolve().parents[2]
LEARN = ROOT / "recipes" / "learn" / "tasks"
HARNESS = {"max_turns": 4, "max_tokens": 96, "progress": False, "concurrency": 4,
           "reference": {"sub_agent": False, "tools": ["read_file", "write_file", "finish"]}}


@pytest.fixture(scope="module")
def suite(tmp_path_factory) -> Path:
    """A small learn suite of the single-conversation families (write, write2, copy), with its rename.json."""
    spec = importlib.util.spec_from_file_location("learn_make_tasks", ROOT / "recipes" / "learn" / "make_tasks.py")
    make_tasks = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = make_tasks  # dataclasses look their module up
    spec.loader.exec_module(make_tasks)
    root = tmp_path_factory.mktemp("learn")
    make_tasks.generate(root, {"train": 3, "dev": 3, "test": 3}, ("write", "write2", "copy"), 45, 0)
    return root


def first_task(suite: Path, family: str) -> Path:
    return sorted((suite / "train").glob(f"train-{family}-*"))[0]


def words_of(task: Path) -> list[str]:
    """The words of a task's names and values, in order of first appearance."""
    strings = re.findall(r'"([^"]+)"', (task / "start.md").read_text())
    strings += [p.read_text().strip() for p in (task / "reference").iterdir()]
    return list(dict.fromkeys(w for s in strings for w in re.findall(r"[a-z]+", s) if w != "txt"))


def renamed_copy(task: Path, old: str, new: str, dest: Path) -> Path:
    """The task folder with the word ``old`` replaced by ``new`` in every name and value (file names, texts,
    and the string literals of the hidden check script)."""
    pattern = re.compile(rf"(?<![a-z]){old}(?![a-z])")
    target = dest / task.name
    for source in sorted(task.rglob("*")):
        if source.is_file():
            out = target / pattern.sub(new, str(source.relative_to(task)))
            out.parent.mkdir(parents=True, exist_ok=True)
            text = source.read_text()
            if source.suffix == ".py":
                text = re.sub(r"'[^'\n]*'", lambda literal: pattern.sub(new, literal.group()), text)
            else:
                text = pattern.sub(new, text)
            out.write_text(text)
    return target


def record(task_root: Path, run_dir: Path, seed: int = 3):
    tasks = load_tasks("nl2repo", task_root).tasks
    run = asyncio.run(record_demonstrations(tasks, model_path="tiny", harness_config=HarnessConfig.from_mapping(HARNESS),
                                            sandbox=Sandbox(), run_dir=run_dir, samples_per_task=1, seed=seed))
    return load_records([run.records]).examples


def rename_file(tmp_path: Path, words: list[str], exclude: list[str] = ()) -> Path:
    path = tmp_path / "rename.json"
    path.write_text(json.dumps({"words": words, "exclude": list(exclude)}))
    return path


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer("tiny")


@pytest.mark.parametrize("family", ["copy", "write2"])
def test_a_renamed_demonstration_is_what_the_renamed_task_records(family, suite, tokenizer, tmp_path):
    task = first_task(suite, family)
    suite_words = json.loads((suite / "rename.json").read_text())["words"]
    old = next(w for w in words_of(task) if w in suite_words)
    # a word of the same length: the tool's "wrote N characters" reply is then the same too
    new = next(w for w in suite_words if len(w) == len(old) and w not in words_of(task))
    shutil.copytree(task, tmp_path / "original" / task.name)
    original = record(tmp_path / "original", tmp_path / "rec_original")[0]
    expected = record(renamed_copy(task, old, new, tmp_path / "renamed").parent, tmp_path / "rec_renamed")[0]
    assert [c.response_ids for c in expected.calls] != [c.response_ids for c in original.calls]

    renaming = Renaming.from_file(rename_file(tmp_path, [old, new]), tokenizer)
    swapped = next(r for r in (renaming.apply(original, random.Random(seed)) for seed in range(20))
                   if [c.response_ids for c in r.calls] != [c.response_ids for c in original.calls])
    assert len(swapped.calls) == len(expected.calls) >= 2
    for got, want in zip(swapped.calls, expected.calls):
        assert got.prompt_ids == want.prompt_ids
        assert got.response_ids == want.response_ids
        assert got.response_logprobs == want.response_logprobs


def test_renaming_never_makes_an_excluded_string(suite, tokenizer, tmp_path):
    task = first_task(suite, "write")
    shutil.copytree(task, tmp_path / "one" / task.name)
    example = record(tmp_path / "one", tmp_path / "rec")[0]
    path_name = (task / "start.md").read_text().split('"')[1]  # "<a>_<b>.txt"
    first, second = path_name[:-4].split("_")
    other = next(w for w in json.loads((suite / "rename.json").read_text())["words"] if w not in words_of(task))
    # swapping `first` and `other` is the only permutation that renames; it would write the excluded name
    excluded = f"{other}_{second}.txt"
    renaming = Renaming.from_file(rename_file(tmp_path, [first, other], [excluded]), tokenizer)
    banned = tokenizer.encode(excluded, add_special_tokens=False)
    for seed in range(10):
        renamed = renaming.apply(example, random.Random(seed))
        # the swap makes the excluded name, so it is drawn again until the identity comes: the names as recorded
        assert [c.prompt_ids + c.response_ids for c in renamed.calls] == [c.prompt_ids + c.response_ids for c in example.calls]
    text = tokenizer.decode(example.calls[-1].prompt_ids + example.calls[-1].response_ids)
    assert excluded not in text and path_name in text and banned
    # without the exclusion the same draws do rename it
    free = Renaming.from_file(rename_file(tmp_path, [first, other]), tokenizer)
    renamed_texts = {tokenizer.decode(free.apply(example, random.Random(seed)).calls[-1].prompt_ids) for seed in range(10)}
    assert any(excluded in text for text in renamed_texts)


def strings_of(split: Path) -> set[str]:
    """Every quoted string of the split's instructions and workspace files, and every solved file's content."""
    found = set()
    for task in split.iterdir():
        texts = [(task / "start.md").read_text()] + [p.read_text() for p in (task / "workspace").glob("*")]
        found |= {s for text in texts for s in re.findall(r'"([^"]+)"', text)}
        found |= {p.read_text().strip() for p in (task / "reference").iterdir()}
    return found


def test_the_learn_suites_rename_file_keeps_held_out_names_out(tokenizer):
    spec = json.loads((LEARN / "rename.json").read_text())
    held_out = strings_of(LEARN / "dev") | strings_of(LEARN / "test")
    assert held_out <= set(spec["exclude"]) and not strings_of(LEARN / "train") & set(spec["exclude"])
    Renaming.from_file(LEARN / "rename.json", tokenizer)  # every word is one token, alone and after a space


def test_bad_rename_files_are_refused_with_the_reason(tokenizer, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(RenamingError, match="broken.json"):
        Renaming.from_file(broken, tokenizer)
    with pytest.raises(RenamingError, match="'notaword_xyz' is not one token"):
        Renaming.from_file(rename_file(tmp_path, ["list", "notaword_xyz"]), tokenizer)
    with pytest.raises(RenamingError, match="at least two distinct words"):
        Renaming.from_file(rename_file(tmp_path, ["list", "list"]), tokenizer)


def test_sft_refuses_words_of_the_shared_prompt_and_resumes_renaming_as_it_was(suite, tmp_path):
    shutil.copytree(first_task(suite, "write"), tmp_path / "tasks" / first_task(suite, "write").name)
    shutil.copytree(first_task(suite, "copy"), tmp_path / "tasks" / first_task(suite, "copy").name)
    examples = record(tmp_path / "tasks", tmp_path / "rec")
    # "file" is in the harness's tool names (write_file): renaming it would rewrite the prompt
    prompt_word = SFTConfig(steps=1, batch_executions=2, rename_file=str(rename_file(tmp_path, ["file", "list"])))
    with pytest.raises(RenamingError, match="occur in the prompt every demonstration shares"):
        SFTTrainer(prompt_word, "tiny", tmp_path / "refused", progress=False).fit(examples)

    words = json.loads((suite / "rename.json").read_text())["words"]
    cfg = dict(batch_executions=2, lr=1e-3, min_lr_ratio=1.0, warmup_steps=1, save_every=3, short_context_steps=2,
               rename_file=str(rename_file(tmp_path, words)))
    whole = SFTTrainer(SFTConfig(steps=6, **cfg), "tiny", tmp_path / "whole", progress=False)
    whole.fit(examples)
    first = SFTTrainer(SFTConfig(steps=3, **cfg), "tiny", tmp_path / "split", progress=False)
    first.fit(examples)
    second = SFTTrainer(SFTConfig(steps=6, resume=True, **cfg), "tiny", tmp_path / "split", progress=False)
    second.fit(examples)
    losses = [row["sft/loss"] for row in whole.history]
    assert [row["sft/loss"] for row in second.history] == pytest.approx(losses, rel=1e-4)
    # the renamed runs trained on other tokens than the recorded ones
    plain = SFTTrainer(SFTConfig(steps=6, **{**cfg, "rename_file": None}), "tiny", tmp_path / "plain", progress=False)
    plain.fit(examples)
    assert [row["sft/loss"] for row in plain.history] != pytest.approx(losses, rel=1e-4)


def test_sft_on_one_task_does_not_take_its_instruction_for_the_shared_prompt(suite, tmp_path, caplog):
    """One task's demonstrations share their whole first prompt, instruction included: its words are what the
    rename file renames, so SFT trains (and says the shared prompt was not checked) instead of refusing."""
    task = first_task(suite, "write")
    shutil.copytree(task, tmp_path / "tasks" / task.name)
    examples = record(tmp_path / "tasks", tmp_path / "rec")
    words = json.loads((suite / "rename.json").read_text())["words"]
    assert set(words_of(task)) & set(words)  # the instruction holds rename words
    cfg = SFTConfig(steps=1, batch_executions=1, rename_file=str(rename_file(tmp_path, words)))
    with caplog.at_level("WARNING", logger="gyre.trainer.sft"):
        SFTTrainer(cfg, "tiny", tmp_path / "one", progress=False).fit(examples)
    assert "not checked" in caplog.text
