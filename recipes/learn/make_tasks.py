"""Generate the built-in `learn` suite: tasks a CPU model can learn, in three splits (train / dev / test).

    python recipes/learn/make_tasks.py [--out recipes/learn/tasks] [--train 288] [--dev 48] [--test 48]
                                       [--families search] [--drills 576] [--drill-families write,write2,copy]
                                       [--lookups 192] [--searches 232]
                                       [--words 45] [--seed 0] [--report-mistake missed|outdated]
                                       [--no-write-probability 0.25]

Every task is an NL2RepoBench task folder (start.md, test_case_count.txt, test_commands.json,
test_files.json, hidden/, reference/, plus Gyre's optional workspace/ of starting files), scored by two
hidden checks (so the reward is 0, 0.5 or 1: partial credit). Families:

- ``search`` (the recipe's; its executions branch): the current value is on one of six pages the agent
  starts with (``page1.txt`` .. ``page6.txt``), next to an outdated one; the agent must write it into a
  new file. The answer is reachable only through tool outputs: the reference agent, as the demonstrator,
  hands each page to a sub-agent in one reply (six ``delegate`` calls: six conversations of their own,
  tagged ``sub``, each reading its page and reporting), its conversation then passes the harness's
  ``context_chars`` and is rewritten by a summary (a ``main-summary`` call), and from that summary it
  writes the file and finishes: 16 model calls, a tree of 8 paths (6 sub-agents, the conversation before
  the summary, the one after). Checks: the file exists; it holds the current value.
- ``write``: create one file whose content the instruction gives; the instruction also names an outdated
  value that must not be used. Checks: the file exists; its content is the new value.
- ``write2``: the same for two files. Checks: each file's content.
- ``copy``: copy a given file into a new one (read_file, then write_file with what it read). Checks: the
  copy is exact; the source is unchanged.
- ``lookup``: ``search`` with one page: the agent starts with one ``page<k>.txt`` (k in 1..6) holding the
  current and the outdated value, and must write the current value into a new file. The demonstrator hands
  the page to a sub-agent, which reads it and reports the value (exactly as in ``search``), and writes the
  reported value: ``delegate``, the sub-agent's ``read_file`` and ``report``, ``write_file``, ``finish`` (no
  summary: the conversation stays under ``context_chars``). Checks: the file exists; it holds the current value.

Names and values are pairs of words (``<word>_<word>.txt``, ``<word>-<word>``), and every ordered pair is
used at most once in the whole suite, so **no name or value occurs in more than one split** (nor in two
tasks): validation measures what the policy does with strings it never saw. The words are whole tokens of
the built-in tokenizer that occur in no fixed text the agent sees (the harness's prompts and tool schemas,
the suite's own sentences), so every token a held-out answer needs also occurs in training, and renaming
(below) never rewrites a fixed text.

Training tasks carry ``demonstrations.jsonl``: transcripts of an imperfect demonstrator (what a weaker
model's logged runs would give), one line per behaviour with its probability. With ``--report-mistake
outdated`` (the earlier suites' demonstrator; ``missed``, below, is the default) in ``search`` its sub-agent
reports the outdated value rather than the current one with probability 0.6 (more often than not, so that
decoding the imitating model greedily cannot remove that mistake: only the reward can), and it finishes
without writing the file with probability 0.25. In the other families it picks the outdated value with
probability 0.35, stops after the first of two files with probability 0.3, and copies into the source path
instead of the new one with probability 0.35.

``--report-mistake missed`` (the default, the committed suite's) changes only the demonstrations (the tasks are
byte for byte the same): on the page holding the value, the sub-agent of ``search`` and ``lookup`` reports no
value (``NOT_FOUND``) with the same probabilities (0.6, 0.35) instead of the outdated one, and the main agent,
told no page holds it, finishes without writing. Every value the demonstrator copies out of a page is then the current one, so the copy itself
has one right answer and the mistake is a decision at the report's first word. Why: a sub-agent imitating a
demonstrator that copies either line, sampled at temperature 1, mostly reports words of neither or of both
(recipes/learn/README.md, "Where a sampled value goes wrong").

``drills/`` (training only, never validated) holds ``--drills`` tasks of the copying families
(``--drill-families``: ``write``, ``write2``, ``copy``) with their demonstrations: the recipe's warm start
demonstrates them beside the training split (``warm_start.also_demonstrate``). Why: in a ``search``
demonstration the names the model must copy are ~3% of its trained tokens, and a warm start on those alone
learned the conversation's shape and copied nothing (every greedy dev execution wrote one constant file).
Which mix makes copying appear is measured in recipes/learn/README.md ("Does the warm start copy?"). Their
strings avoid every dev and test string; they may repeat training ones and each other (renaming replaces them
at every step anyway). Their names may also use ``ANCHOR_WORDS`` ("file"), words of the fixed texts that
renaming never touches: without such an anchor, copying did not appear within 900 short-context supervised
steps (ten runs; with it, by ~400).

``--lookups`` adds that many ``lookup`` drills (``drills/drill-lookup-*``), from their own pairs and generator, so
the other drills are the same with or without them. Why: the warm start on the other drills copies names and
the summary's value, but its sub-agents copy the value out of their page poorly (recipes/learn/README.md,
"Where the recipe stands"): a ``search`` sub-agent's conversation holds the value in one of six, and no other
drill has a sub-agent.

``--searches`` (232 in the committed suite) adds that many ``search`` drills (``drills/drill-search-*``, their own pairs and generator too) whose
demonstrator's sub-agent always reports the current value (it still finishes without writing with probability
0.25). Why: the summary copies the reported value out of six reports 90-180 tokens back, the one copy of a
``search`` execution that no other drill trains, and it gets little of the loss: with ``--report-mistake
missed`` only 40% of the ``search`` demonstrations report a value, and a ``search`` execution's ~750 trained
tokens share one execution's weight (``sft.loss_agg``). With those found-value demonstrations tripled, the copy
was learned; without, it was not (one SFT run each, dev); built from scratch with ``--searches 232``, one build of
three learned it fully, one mostly and one missed another copy (recipes/learn/README.md, "Demonstrations of the
summary's copy"); the recipe pins the first (``warm_start.seed: 2``).

``--no-write-probability`` (0.25 in the committed suite) is how often the ``search`` demonstrator (tasks and
drills alike), having found the value, finishes without writing it. Why it is a flag: the ``search`` drills made
every mistake of the committed suite a minority of what the warm start imitates (the value missed in 344 of 1040
``search``-family recordings, no write in 180 of the 696 that found it), so greedy decoding of the warm start
already solves every task (recipes/learn/README.md); above one half, greedy decoding takes the mistake and only the
reward can remove it. A suite made with it has not been built or measured yet.

``rename.json`` lists the words the warm start may rename in its demonstrations (``sft.rename_file``,
`gyre.trainer.renaming`: fresh names at every supervised step, so that the model learns to copy names
rather than fit the training tasks' ones) and every dev and test string, which renaming must never produce.

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
# The suite uses the first --words of them that no fixed text holds (see `fixed_token_words`).
WORDS = (
    "back begin best blocks break case change check class close codes column data decode default diff encode "
    "equal file find flag form group header import item line list long make mark match next only pair parse "
    "place print push quick range scan side size sort adjacent blanks char chunks context current delete desc "
    "dict escape except expand float format from indent insert iter junk like link lines lineno longest matches "
    "name norm object pairs posix prefix quotes replace repr result self sent source split start state string "
    "strip table tabs test text three token true tuple unified used value width word words wrap yield"
).split()
RENAME_FILE = "rename.json"
SPLITS = ("train", "dev", "test")
HELD_OUT = ("dev", "test")
DRILLS = "drills"  # training-only copying tasks the warm start demonstrates (never validated)
# Words of the fixed texts that the drills' names may use too ("file" is in `write_file`, `read_file`, "the file").
# Renaming never touches them (it would rewrite the tool names), so their token stays the same in every step's
# names: plausibly an anchor a small model learns to copy first, copying every other name following. Without one,
# no supervised run on the drills or on an earlier-style split made copying appear within 900 short-context steps
# (ten runs); with "file" in the names it appeared by ~400 (two runs), as on the earlier suite, whose names used
# fixed-text words by accident (recipes/learn/README.md, "What changed is the task generator").
ANCHOR_WORDS = ("file",)

# The search family (the recipe's). CONTEXT_CHARS must equal harness.reference.context_chars of
# conf/recipe/learn.yaml (tested): the demonstrator's conversation passes it once, after the six reports.
PAGES = 6
CONTEXT_CHARS = 1600
COMPACTION_MARGIN = 150  # characters the demonstrator's conversation keeps from CONTEXT_CHARS on either side
OUTDATED_REPORT_PROBABILITY = 0.6  # the demonstrator's sub-agent reports the outdated value (--report-mistake outdated)
MISSED_REPORT_PROBABILITY = 0.6  # ... or no value on the page that holds it (--report-mistake missed)
REPORT_MISTAKES = ("outdated", "missed")  # what the --report-mistake flag offers; "none" is the --searches drills'
NO_WRITE_PROBABILITY = 0.25  # the demonstrator finishes after the summary without writing the file
# The other families.
STALE_PROBABILITY = 0.35  # the demonstrator writes the outdated value
EARLY_STOP_PROBABILITY = 0.3  # the demonstrator finishes after the first of two files
WRONG_TARGET_PROBABILITY = 0.35  # the demonstrator copies into the source path
FAMILIES = ("search", "write", "write2", "copy", "lookup")
CHECK_FILE = "test_task.py"
# The hidden checks are pytest tests: scorers count the tests pytest reports passed (by node id), never a printed count.
# No plugin autoload: the installed plugins (xdist, timeout) would triple the start-up time of every scoring.
TEST_COMMAND = f"PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider {CHECK_FILE}"

SEARCH_INSTRUCTION = ('Write the current value into the new file "{out}". It is on one of the pages page1.txt to '
                      f"page{PAGES}.txt: hand each page to a helper.\n")
LOOKUP_INSTRUCTION = 'Write the current value into the new file "{out}". It is on the page page{index}.txt: hand the page to a helper.\n'
PAGE_NAME = "page{index}.txt"
PAGE_TASK = "Find the current value in page{index}.txt."
EMPTY_PAGE = "No value on this page.\n"
NOT_FOUND = "No current value in page{index}.txt."
NONE_FOUND = "No current value in the pages."  # the summary after a missed value (--report-mistake missed)
FOUND = 'The current value is "{value}".'
CURRENT_LINE = 'current value: "{value}"'
OUTDATED_LINE = 'outdated value: "{value}"'

CHECK_SCRIPT = '''"""Hidden checks of task {task_id}, one pytest test each."""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def content(path):
    file = HERE / path
    return file.read_text(encoding="utf-8", errors="replace").strip() if file.is_file() else None
{tests}'''
CHECK_TEST = '''

def test_{name}():
    found = content({path!r})
    assert {condition}, f"found {{found!r}}"
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


def sub(reply: dict) -> dict:
    return {"agent": "sub", **reply}


def page_text(new: str, old: str, rng: random.Random) -> str:
    """The page holding the value, in `search` and `lookup` alike: the current and the outdated line, in either order."""
    lines = [CURRENT_LINE.format(value=new), OUTDATED_LINE.format(value=old)]
    rng.shuffle(lines)
    return "\n".join(lines) + "\n"


def report_call(report: str) -> dict:
    return {"name": "report", "arguments": {"report": report}}


def make_search(task_id: str, out: str, new: str, old: str, rng: random.Random, report_mistake: str = "outdated",
                no_write: float = NO_WRITE_PROBABILITY) -> Task:
    """Six pages, one holding the current value (and an outdated one, in either order); see the module docstring."""
    found_on = rng.randrange(1, PAGES + 1)
    value_page = page_text(new, old, rng)
    pages = {PAGE_NAME.format(index=i): (value_page if i == found_on else EMPTY_PAGE)
             for i in range(1, PAGES + 1)}
    delegate = {"tool_calls": [{"name": "delegate", "arguments": {"task": PAGE_TASK.format(index=i)}}
                               for i in range(1, PAGES + 1)]}

    def read_pages(found: str | None) -> list[dict]:
        replies = [delegate]
        for i in range(1, PAGES + 1):
            report = FOUND.format(value=found) if i == found_on and found else NOT_FOUND.format(index=i)
            replies += [sub(read_call(PAGE_NAME.format(index=i))), sub(report_call(report))]
        return replies

    n, o, m = no_write, OUTDATED_REPORT_PROBABILITY, MISSED_REPORT_PROBABILITY
    if report_mistake == "outdated":
        reports = ((new, 1 - o, ""), (old, o, "sub-agent reports the outdated value"))
    elif report_mistake == "missed":  # the one copy out of the page stays unambiguous; missing it is a decision
        reports = ((new, 1 - m, ""),)
    else:  # "none" (the --searches drills): every demonstration's summary copies the current value
        reports = ((new, 1.0, ""),)
    demonstrations = []
    for reported, p_report, label in reports:
        replies = [*read_pages(reported), {"agent": "main-summary", "text": FOUND.format(value=reported)}]
        for writes, p_write in ((True, 1 - n), (False, n)):
            behaviour = ", ".join(filter(None, (label, "" if writes else "finishes without writing"))) or "expert"
            calls = [*replies, *([write_call(out, reported)] if writes else []), FINISH]
            demonstrations.append({"behaviour": behaviour, "probability": p_report * p_write, "calls": calls})
    if report_mistake == "missed":
        demonstrations.append({"behaviour": "sub-agent misses the value", "probability": m,
                               "calls": [*read_pages(None), {"agent": "main-summary", "text": NONE_FOUND}, FINISH]})
    check_compaction(task_id, out, new)
    return Task(
        task_id,
        "search",
        SEARCH_INSTRUCTION.format(out=out),
        [("file_exists", "exists", out, ""), ("file_content", "equals", out, new)],
        {out: new + "\n"},
        starting=pages,
        demonstrations=sorted(demonstrations, key=lambda d: -d["probability"]),
        names=(out, new, old),
    )


def make_lookup(task_id: str, out: str, new: str, old: str, rng: random.Random, report_mistake: str = "outdated") -> Task:
    """One page holding the current and the outdated value, handed to a sub-agent; see the module docstring."""
    index = rng.randrange(1, PAGES + 1)
    page, text = PAGE_NAME.format(index=index), page_text(new, old, rng)
    delegate = {"name": "delegate", "arguments": {"task": PAGE_TASK.format(index=index)}}
    s = STALE_PROBABILITY
    demonstrations = [
        {"behaviour": "expert", "probability": 1 - s,
         "calls": [delegate, sub(read_call(page)), sub(report_call(FOUND.format(value=new))), write_call(out, new), FINISH]}
    ]
    if report_mistake == "outdated":
        demonstrations.append({"behaviour": "sub-agent reports the outdated value", "probability": s,
                               "calls": [delegate, sub(read_call(page)), sub(report_call(FOUND.format(value=old))),
                                         write_call(out, old), FINISH]})
    else:
        demonstrations.append({"behaviour": "sub-agent misses the value", "probability": s,
                               "calls": [delegate, sub(read_call(page)), sub(report_call(NOT_FOUND.format(index=index))),
                                         FINISH]})
    instruction = LOOKUP_INSTRUCTION.format(out=out, index=index)
    after_report = conversation_chars([instruction_message(instruction), assistant(delegate),
                                       tool(FOUND.format(value=new)), assistant(write_call(out, new))])
    if after_report > CONTEXT_CHARS - COMPACTION_MARGIN:
        raise SystemExit(f"{task_id}: {after_report} characters before the write call; the harness would summarise "
                         f"(CONTEXT_CHARS={CONTEXT_CHARS})")
    return Task(
        task_id,
        "lookup",
        instruction,
        [("file_exists", "exists", out, ""), ("file_content", "equals", out, new)],
        {out: new + "\n"},
        starting={page: text},
        demonstrations=demonstrations,
        names=(out, new, old),
    )


# The main conversation as `gyre.harness.reference` counts it against CONTEXT_CHARS (for the checks below).
def conversation_chars(messages: list[dict]) -> int:
    from gyre.harness.reference import MAIN_SYSTEM

    return sum(len(json.dumps(message, ensure_ascii=False)) for message in [{"role": "system", "content": MAIN_SYSTEM},
                                                                            *messages])


def instruction_message(text: str) -> dict:
    return {"role": "user", "content": "Task:\n" + text}


def assistant(*calls: dict) -> dict:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_" + "0" * 24, "type": "function",
         "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)}}
        for call in calls]}


def tool(content: str) -> dict:
    return {"role": "tool", "tool_call_id": "call_" + "0" * 24, "content": content}


def check_compaction(task_id: str, out: str, value: str, margin: int = COMPACTION_MARGIN) -> None:
    """The demonstrator's conversation must pass CONTEXT_CHARS after the six reports and stay under it after
    the summary (as `gyre.harness.reference` counts it), with a margin: else the harness would summarise at
    another turn than the script does (recording checks the roles; this catches it when the suite is made)."""
    task = instruction_message(SEARCH_INSTRUCTION.format(out=out))
    delegates = [{"name": "delegate", "arguments": {"task": PAGE_TASK.format(index=i)}} for i in range(1, PAGES + 1)]
    before = conversation_chars([task, assistant(*delegates), *[tool(NOT_FOUND.format(index=i)) for i in range(1, PAGES)],
                                 tool(FOUND.format(value=value))])
    # a demonstrator that missed the value has the shorter conversation (--report-mistake missed): it must pass too
    before = min(before, conversation_chars([task, assistant(*delegates),
                                             *[tool(NOT_FOUND.format(index=i)) for i in range(1, PAGES + 1)]]))
    summary = f"{task['content']}\n\nSummary of your work so far:\n{FOUND.format(value=value)}"
    after = conversation_chars([{"role": "user", "content": summary}, assistant(write_call(out, value)),
                                tool(f"wrote {len(value)} characters to {out}")])
    if not before > CONTEXT_CHARS + margin or not after < CONTEXT_CHARS - margin:
        raise SystemExit(f"{task_id}: the conversation has {before} characters after the reports and {after} after the "
                         f"summary; CONTEXT_CHARS={CONTEXT_CHARS} must lie between them with {margin} to spare")


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


def fixed_texts() -> list[str]:
    """Every text the agent sees that no task chooses: the reference harness's prompts and tool schemas, and
    the suite's own sentences."""
    from gyre.harness import reference
    from gyre.harness.reference_tools import MAIN_TOOLS, SUB_TOOLS

    harness = [reference.MAIN_SYSTEM, reference.SUB_SYSTEM, reference.SUMMARY_PROMPT, reference.EXPLORE_TASK,
               reference.INVALID_REPLY, reference.NO_TOOL_CALL, json.dumps(MAIN_TOOLS), json.dumps(SUB_TOOLS),
               "Task:\n", "\n\nSummary of your work so far:\n", "A helper explored the repository and reported:"]
    suite = [SEARCH_INSTRUCTION, LOOKUP_INSTRUCTION, PAGE_TASK, EMPTY_PAGE, NOT_FOUND, NONE_FOUND, FOUND, CURRENT_LINE, OUTDATED_LINE,
             file_item("", "", ""), "Create the file .", "Create two files:\n1. \n2. ",
             'Copy the content of "" into the new file "". Leave "" as it is.', json.dumps(FINISH),
             "wrote 10 characters to "]
    return harness + suite


def fixed_token_words(words: list[str]) -> set[str]:
    """The words whose tokens (alone or after a space) occur in a fixed text: renaming them would rewrite it,
    so names never use them."""
    from gyre.models import load_tokenizer

    tokenizer = load_tokenizer("small")
    seen = {token for text in fixed_texts() for token in tokenizer.encode(text, add_special_tokens=False)}
    return {word for word in words
            if any(set(tokenizer.encode(variant, add_special_tokens=False)) & seen for variant in (word, " " + word))}


class Strings:
    """Word pairs for paths and values, each used once in the whole suite: no string repeats across tasks or
    splits. Held-out splits are made first. The drills have their own, which avoids the held-out pairs and may
    ``reuse`` pairs once all are used."""

    def __init__(self, words: list[str], rng: random.Random, avoid: set[tuple[str, str]] = frozenset(),
                 reuse: bool = False) -> None:
        self.words, self.rng, self.reuse = words, rng, reuse
        self.allowed = [(a, b) for a, b in itertools.permutations(words, 2) if (a, b) not in avoid]
        self.pairs = list(self.allowed)
        rng.shuffle(self.pairs)
        self.used: list[tuple[str, str]] = []

    def room_for(self, count: int) -> None:
        """With ``reuse``, make sure the next ``count`` pairs are there and distinct: when the unused ones run
        short, every allowed pair but those comes back, in a new order, behind them."""
        if self.reuse and len(self.pairs) < count:
            left = set(self.pairs)
            fresh = [pair for pair in self.allowed if pair not in left]
            self.rng.shuffle(fresh)
            self.pairs = fresh + self.pairs

    def _pair(self) -> tuple[str, str]:
        if not self.pairs:
            raise SystemExit(f"{len(self.words)} words give too few distinct pairs for this many tasks (--words)")
        self.used.append(self.pairs.pop())
        return self.used[-1]

    def path(self) -> str:
        a, b = self._pair()
        return f"{a}_{b}.txt"

    def value(self) -> str:
        a, b = self._pair()
        return f"{a}-{b}"


def make_tasks(split: str, count: int, families: tuple[str, ...], strings: Strings, rng: random.Random,
               report_mistake: str = "outdated", no_write: float = NO_WRITE_PROBABILITY) -> list[Task]:
    tasks = []
    for index in range(count):
        family = families[index % len(families)]
        strings.room_for(6)  # the most pairs one task takes (write2)
        task_id = f"{split}-{family}-{index:0{max(3, len(str(count - 1)))}d}"
        if family == "search":
            tasks.append(make_search(task_id, strings.path(), strings.value(), strings.value(), rng, report_mistake, no_write))
        elif family == "write":
            tasks.append(make_write(task_id, strings.path(), strings.value(), strings.value()))
        elif family == "lookup":
            tasks.append(make_lookup(task_id, strings.path(), strings.value(), strings.value(), rng, report_mistake))
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
    (folder / "test_commands.json").write_text(json.dumps([TEST_COMMAND]) + "\n")
    (folder / "test_files.json").write_text(json.dumps([CHECK_FILE]) + "\n")
    (folder / "hidden").mkdir()
    tests = "".join(CHECK_TEST.format(name=name, path=path, condition="found is not None" if kind == "exists"
                                      else f"found == {expected!r}") for name, kind, path, expected in task.checks)
    (folder / "hidden" / CHECK_FILE).write_text(CHECK_SCRIPT.format(task_id=task.task_id, tests=tests))
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


def check_families(flag: str, families: tuple[str, ...]) -> None:
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown or not families:
        raise SystemExit(f"{flag}: unknown {unknown or 'none given'}; the families are {list(FAMILIES)}")


def generate(out: Path, counts: dict[str, int], families: tuple[str, ...], words: int, seed: int,
             drills: int = 0, drill_families: tuple[str, ...] = ("write", "write2", "copy"),
             lookups: int = 0, report_mistake: str = "outdated", searches: int = 0,
             no_write: float = NO_WRITE_PROBABILITY) -> dict[str, list[Task]]:
    """Write the suite under ``out`` (train/, dev/, test/, drills/ when ``drills``, ``lookups`` or ``searches``,
    rename.json);
    returns the tasks by split."""
    check_families("--families", families)
    if report_mistake not in REPORT_MISTAKES:
        raise SystemExit(f"--report-mistake: {report_mistake!r}; choose one of {list(REPORT_MISTAKES)}")
    if not 0 <= no_write < 1:
        raise SystemExit(f"--no-write-probability must be in [0, 1) (a search demonstrator that never writes teaches no "
                         f"write), got {no_write}")
    if drills:
        check_families("--drill-families", drill_families)
    fixed = fixed_token_words(WORDS)
    usable = [word for word in WORDS if word not in fixed]
    if not 2 <= words <= len(usable):
        raise SystemExit(f"--words must be between 2 and {len(usable)} (words no fixed text holds)")
    rng = random.Random(seed)
    strings = Strings(usable[:words], rng)
    tasks = {split: make_tasks(split, counts[split], families, strings, rng, report_mistake, no_write) for split in HELD_OUT[::-1]}
    held_out_pairs = set(strings.used)
    tasks["train"] = make_tasks("train", counts["train"], families, strings, rng, report_mistake, no_write)
    if drills:  # their own pairs and generator, so the splits above are the same with or without them
        drill_strings = Strings([*usable[:words], *ANCHOR_WORDS], random.Random(f"{seed}-{DRILLS}"), avoid=held_out_pairs,
                                reuse=True)
        tasks[DRILLS] = make_tasks("drill", drills, drill_families, drill_strings, random.Random(f"{seed}-{DRILLS}"),
                                   report_mistake, no_write)

    def own_drills(family: str, count: int, mistake: str) -> None:
        """``count`` drills of one family from their own pairs and generator, so every other drill is the same with or
        without them."""
        own_rng = random.Random(f"{seed}-{DRILLS}-{family}")
        own_strings = Strings([*usable[:words], *ANCHOR_WORDS], own_rng, avoid=held_out_pairs, reuse=True)
        tasks.setdefault(DRILLS, []).extend(make_tasks("drill", count, (family,), own_strings, own_rng, mistake, no_write))

    if lookups:
        own_drills("lookup", lookups, report_mistake)
    if searches:  # the sub-agent always reports the value: every demonstration's summary copies it
        own_drills("search", searches, "none")
    for split in (*SPLITS, DRILLS, "heldout"):  # heldout: the two-split layout this suite had before
        shutil.rmtree(out / split, ignore_errors=True)
    for split, split_tasks in tasks.items():
        for task in split_tasks:
            write_task(out / split, task, with_demonstrations=split not in HELD_OUT)
    held_out = sorted({name for split in HELD_OUT for task in tasks[split] for name in task.names})
    (out / RENAME_FILE).write_text(json.dumps({"words": usable[:words], "exclude": held_out}, indent=0) + "\n")
    return tasks


def comma_list(flag: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in flag.split(",") if name.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "tasks")
    parser.add_argument("--train", type=int, default=288, help="training tasks")
    parser.add_argument("--dev", type=int, default=48, help="dev tasks (for tuning)")
    parser.add_argument("--test", type=int, default=48, help="test tasks (sealed: only the benchmark's final figures)")
    parser.add_argument("--families", default="search", help=f"comma-separated, of {','.join(FAMILIES)}")
    parser.add_argument("--drills", type=int, default=576, help="training-only copying tasks for the warm start (0: none)")
    parser.add_argument("--drill-families", default="write,write2,copy", help="comma-separated families of the drills")
    parser.add_argument("--lookups", type=int, default=192, help="training-only lookup drills (a sub-agent reads a page)")
    parser.add_argument("--searches", type=int, default=232,
                        help="training-only search drills whose sub-agent always reports the value (the summary's copy)")
    parser.add_argument("--words", type=int, default=45, help="how many words names are made of")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--report-mistake", choices=REPORT_MISTAKES, default="missed",
                        help="the demonstrator's sub-agent, on the page holding the value: reports the outdated one, "
                             "or misses it (reports no value)")
    parser.add_argument("--no-write-probability", type=float, default=NO_WRITE_PROBABILITY,
                        help="search tasks and drills: how often the demonstrator, having found the value, finishes "
                             "without writing it")
    args = parser.parse_args()
    tasks = generate(args.out, {"train": args.train, "dev": args.dev, "test": args.test}, comma_list(args.families),
                     args.words, args.seed, drills=args.drills, drill_families=comma_list(args.drill_families),
                     lookups=args.lookups, report_mistake=args.report_mistake, searches=args.searches,
                     no_write=args.no_write_probability)
    print("wrote " + ", ".join(f"{len(found)} {split}" for split, found in tasks.items()) + f" tasks under {args.out}")


if __name__ == "__main__":
    main()
