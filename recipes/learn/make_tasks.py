"""Generate the built-in `learn` suite: small file tasks a CPU model can learn, with a held-out split.

    python recipes/learn/make_tasks.py [--out recipes/learn/tasks] [--train 288] [--heldout 48] [--words 45] [--seed 0]

Every task is an NL2RepoBench task folder (start.md, test_case_count.txt, test_commands.json,
test_files.json, hidden/, reference/, plus Gyre's optional workspace/ of starting files), in one of three
families, each scored by two hidden checks (so the reward is 0, 0.5 or 1: partial credit):

- ``write``: create one file whose content the instruction gives; the instruction also names an outdated
  value that must not be used. Checks: the file exists; its content is the new value.
- ``write2``: the same for two files (two tool calls, several turns). Checks: each file's content.
- ``copy``: copy a given file into a new one. The content is not in the instruction: the agent must read
  the file first (read_file, then write_file with what it read). Checks: the copy is exact; the source
  is unchanged.

Each tool call's arguments are copied from the instruction (paths, values) or from a tool result (the
copied content). Names and values are pairs of words (``<word>_<word>.txt``, ``<word>-<word>``), and
every ordered pair of words is used at most once in the whole suite: no string repeats across tasks, so
supervised training cannot fit the split by remembering strings, and no held-out path, value or content
occurs anywhere in training. Validation measures what the policy does with strings it never saw. The
words are whole tokens of the built-in tokenizer, so every token a held-out answer needs also occurs in
training (a model cannot emit a token it never learned to emit; the split tests new strings, not new
tokens).

Training tasks also carry ``demonstrations.jsonl``: transcripts of an imperfect demonstrator (what a
weaker model's logged runs would give), one line per behaviour with its probability. It picks the
outdated value with probability 0.35, stops after the first of two files with probability 0.3, and
copies into the source path instead of the new one with probability 0.35; otherwise it does the right
thing. Supervised training on these transcripts learns those mistakes at those rates (a policy that
solves about half of the tasks it imitates well; the held-out pass rate after supervised training
is lower, since copying new strings is also imperfect); reinforcement learning can only remove them through the reward.

``rename.json`` lists the words the warm start may rename in its demonstrations (``sft.rename_file``,
`gyre.trainer.renaming`: fresh names at every supervised step, so that the model learns to copy names
rather than fit the training tasks' ones) and every held-out string, which renaming must never produce.
Words of the reference harness's own prompt are left out of it (renaming them would rewrite the prompt).

Deterministic: re-running with the same arguments rewrites the same files.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

# Whole tokens of the built-in tokenizer (with and without a leading space), so names and values are short.
# The suite uses the first --words of them (45: the committed suite; all 104 give 10712 pairs, room for
# ~2600 tasks).
WORDS = (
    "back begin best blocks break case change check class close codes column data decode default diff encode "
    "equal file find flag form group header import item line list long make mark match next only pair parse "
    "place print push quick range scan side size sort adjacent blanks char chunks context current delete desc "
    "dict escape except expand float format from indent insert iter junk like link lines lineno longest matches "
    "name norm object pairs posix prefix quotes replace repr result self sent source split start state string "
    "strip table tabs test text three token true tuple unified used value width word words wrap yield"
).split()

# Words of the reference harness's system prompt and tool schemas ("write_file", "start_line", "object"...):
# names may use them, but renaming them would rewrite the prompt (gyre.trainer.renaming refuses them).
PROMPT_WORDS = {"file", "line", "lines", "only", "current", "desc", "name", "object", "self", "start", "string", "text"}
RENAME_FILE = "rename.json"

STALE_PROBABILITY = 0.35  # the demonstrator writes the outdated value
EARLY_STOP_PROBABILITY = 0.3  # the demonstrator finishes after the first of two files
WRONG_TARGET_PROBABILITY = 0.35  # the demonstrator copies into the source path
FAMILIES = ("write", "write2", "copy")
CHECK_FILE = "check_task.py"

CHECK_SCRIPT = '''"""Hidden checks of task {task_id}: prints one line per check and "N passed, M failed"."""
from pathlib import Path

CHECKS = {checks}


def content(path):
    file = Path(path)
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None


passed = 0
for name, kind, path, expected in CHECKS:
    found = content(path)
    ok = found is not None if kind == "exists" else found == expected
    passed += ok
    print(("PASSED " if ok else "FAILED ") + name + ("" if ok else f": found {{found!r}}"))
print(f"{{passed}} passed, {{len(CHECKS) - passed}} failed")
'''


@dataclass
class Task:
    task_id: str
    family: str
    instruction: str
    checks: list[tuple[str, str, str, str]]  # (name, exists | equals, path, expected content)
    reference: dict[str, str]  # files of the solved workspace
    starting: dict[str, str] = field(default_factory=dict)  # files the agent starts with
    demonstrations: list[dict] = field(default_factory=list)
    names: tuple[str, ...] = ()  # every path and value the task names (held-out ones are kept out of training)


def write_call(path: str, content: str) -> dict:
    return {"name": "write_file", "arguments": {"path": path, "content": content}}


def read_call(path: str) -> dict:
    return {"name": "read_file", "arguments": {"path": path}}


FINISH = {"name": "finish", "arguments": {"summary": "done"}}


def file_item(path: str, new: str, old: str) -> str:
    return f'"{path}" containing exactly "{new}" (not the outdated "{old}")'


def make_write(task_id: str, path: str, new: str, old: str) -> Task:
    s = STALE_PROBABILITY
    return Task(
        task_id,
        "write",
        f"Create the file {file_item(path, new, old)}.\n",
        [("file_exists", "exists", path, ""), ("file_content", "equals", path, new)],
        {path: new + "\n"},
        demonstrations=[
            {"behaviour": "expert", "probability": 1 - s, "calls": [write_call(path, new), FINISH]},
            {"behaviour": "outdated value", "probability": s, "calls": [write_call(path, old), FINISH]},
        ],
        names=(path, new, old),
    )


def make_write2(task_id: str, first: tuple[str, str, str], second: tuple[str, str, str]) -> Task:
    s, e = STALE_PROBABILITY, EARLY_STOP_PROBABILITY
    (p1, new1, old1), (p2, new2, old2) = first, second
    demonstrations = []
    for v1, q1 in ((new1, 1 - s), (old1, s)):
        label1 = "" if v1 == new1 else "outdated first value, "
        demonstrations.append(
            {"behaviour": f"{label1}stops after the first file", "probability": q1 * e, "calls": [write_call(p1, v1), FINISH]}
        )
        for v2, q2 in ((new2, 1 - s), (old2, s)):
            label2 = "" if v2 == new2 else "outdated second value"
            behaviour = (label1 + label2).strip(", ") or "expert"
            calls = [write_call(p1, v1), write_call(p2, v2), FINISH]
            demonstrations.append({"behaviour": behaviour, "probability": q1 * (1 - e) * q2, "calls": calls})
    return Task(
        task_id,
        "write2",
        f"Create two files:\n1. {file_item(p1, new1, old1)}\n2. {file_item(p2, new2, old2)}\n",
        [("first_content", "equals", p1, new1), ("second_content", "equals", p2, new2)],
        {p1: new1 + "\n", p2: new2 + "\n"},
        demonstrations=sorted(demonstrations, key=lambda d: -d["probability"]),
        names=(*first, *second),
    )


def make_copy(task_id: str, source: str, target: str, content: str) -> Task:
    w = WRONG_TARGET_PROBABILITY
    return Task(
        task_id,
        "copy",
        f'Copy the content of "{source}" into the new file "{target}". Leave "{source}" as it is.\n',
        [("copy_content", "equals", target, content), ("source_unchanged", "equals", source, content)],
        {source: content + "\n", target: content + "\n"},
        starting={source: content + "\n"},
        demonstrations=[
            {"behaviour": "expert", "probability": 1 - w, "calls": [read_call(source), write_call(target, content), FINISH]},
            {"behaviour": "writes the source path", "probability": w, "calls": [read_call(source), write_call(source, content), FINISH]},
        ],
        names=(source, target, content),
    )


class Strings:
    """Word pairs for paths and values, each used once in the whole suite: no string repeats across tasks,
    so supervised training cannot fit the split by remembering strings, and no held-out string occurs in
    training. Held-out tasks are made first."""

    def __init__(self, words: list[str], rng: random.Random) -> None:
        self.words = words
        self.pairs = [(a, b) for a, b in itertools.permutations(words, 2)]
        rng.shuffle(self.pairs)

    def _pair(self) -> tuple[str, str]:
        if not self.pairs:
            raise SystemExit(f"{len(self.words)} words give too few distinct pairs for this many tasks (--words)")
        return self.pairs.pop()

    def path(self) -> str:
        a, b = self._pair()
        return f"{a}_{b}.txt"

    def value(self) -> str:
        a, b = self._pair()
        return f"{a}-{b}"


def make_tasks(split: str, count: int, strings: Strings, rng: random.Random) -> list[Task]:
    tasks = []
    for index in range(count):
        family = FAMILIES[index % len(FAMILIES)]
        task_id = f"{split}-{family}-{index:0{max(3, len(str(count - 1)))}d}"
        if family == "write":
            tasks.append(make_write(task_id, strings.path(), strings.value(), strings.value()))
        elif family == "write2":
            first = (strings.path(), strings.value(), strings.value())
            tasks.append(make_write2(task_id, first, (strings.path(), strings.value(), strings.value())))
        else:
            tasks.append(make_copy(task_id, strings.path(), strings.path(), strings.value()))
    rng.shuffle(tasks)
    return tasks


def write_task(root: Path, task: Task, with_demonstrations: bool) -> None:
    folder = root / task.task_id
    folder.mkdir(parents=True)
    (folder / "start.md").write_text(task.instruction)
    (folder / "test_case_count.txt").write_text(f"{len(task.checks)}\n")
    (folder / "test_commands.json").write_text(json.dumps([f"python {CHECK_FILE}"]) + "\n")
    (folder / "test_files.json").write_text(json.dumps([CHECK_FILE]) + "\n")
    (folder / "hidden").mkdir()
    checks = "[\n" + "".join(f"    {check!r},\n" for check in task.checks) + "]"
    (folder / "hidden" / CHECK_FILE).write_text(CHECK_SCRIPT.format(task_id=task.task_id, checks=checks))
    for name, files in (("reference", task.reference), ("workspace", task.starting)):
        for rel, text in files.items():
            (folder / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (folder / name / rel).write_text(text)
    if with_demonstrations:
        lines = [
            json.dumps({"behaviour": demo["behaviour"], "probability": round(demo["probability"], 6), "calls": demo["calls"]})
            for demo in task.demonstrations
        ]
        (folder / "demonstrations.jsonl").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "tasks")
    parser.add_argument("--train", type=int, default=288, help="training tasks (a multiple of 3 keeps families equal)")
    parser.add_argument("--heldout", type=int, default=48, help="held-out tasks")
    parser.add_argument("--words", type=int, default=45, help=f"how many of the {len(WORDS)} words names are made of")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if not 2 <= args.words <= len(WORDS):
        parser.error(f"--words must be between 2 and {len(WORDS)}")
    words = WORDS[:args.words]
    strings = Strings(words, rng)
    heldout = make_tasks("heldout", args.heldout, strings, rng)
    train = make_tasks("train", args.train, strings, rng)
    for split in ("train", "heldout"):
        shutil.rmtree(args.out / split, ignore_errors=True)
    for task in train:
        write_task(args.out / "train", task, with_demonstrations=True)
    for task in heldout:
        write_task(args.out / "heldout", task, with_demonstrations=False)
    heldout_strings = sorted({name for task in heldout for name in task.names})
    renamed = [word for word in words if word not in PROMPT_WORDS]
    (args.out / RENAME_FILE).write_text(json.dumps({"words": renamed, "exclude": heldout_strings}, indent=0) + "\n")
    print(f"wrote {len(train)} training and {len(heldout)} held-out tasks under {args.out}")


if __name__ == "__main__":
    main()
