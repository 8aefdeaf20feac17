"""What the policy got wrong on the learn suite, per validation (or per stretch of training steps).

    python recipes/learn/failures.py runs/<run> [--split dev|test|train] [--every 8] [--suite recipes/learn/tasks]

Reads a finished run's folder (``executions/<id>/workspace`` as the agent left it, ``records/<id>.jsonl`` for
the weight version that made each execution's first call and, for ``search``, what the sub-agents reported
and the summary said) and the suite's task folders, and counts each execution under one outcome: ``pass``,
or the mistake that cost it credit.

``search`` (the recipe's family):

- ``outdated_from_sub``: the file holds the outdated value, which the sub-agent that read the page reported
  (a demonstrator mistake); ``outdated_from_summary``: the reports had the current value, the summary
  named the outdated one; ``outdated``: the file holds it and the records do not say where it came from;
- ``no_write``: the file was never written (the demonstrator's other mistake, or a policy that stopped);
- ``garbled_value``: the file holds neither value (copied wrongly); ``wrong_name``: a file written under
  another name; ``page_changed``: a page was overwritten.

``write`` / ``write2`` / ``copy``: ``outdated``, ``stopped_early`` (write2's second file never written),
``source_changed`` (copy overwrote its source), ``wrong_name``, ``garbled_value``, ``missing``, ``no_write``.

The demonstrator's mistakes are what RL should remove through the reward; the copying errors measure how
well the policy copies strings it has not seen. Under each ``search`` row, what the sub-agent handed the page
holding the value reported (``current``, ``outdated``, ``mixed``: words of both, ``garbled``: other words,
``missed``: no value, ``none``: no report): where a value is first copied, and most often garbled. And word by
word (the value's first word, its second): ``current``, ``outdated``, ``swapped`` (a word of either value from
its other place), ``other``: which of the two copies out of the page failed.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter, defaultdict
from pathlib import Path

SUITE = Path(__file__).resolve().parent / "tasks"
CHECK_FILES = {"test_task.py", "check_task.py"}
QUOTED = re.compile(r'"([^"]+)"')
LINE_VALUE = {kind: re.compile(rf'^{kind} value: "([^"]+)"', re.M) for kind in ("current", "outdated")}  # a page's lines
PAGE_TASK_OF = "Find the current value in {page}."  # make_tasks.py: PAGE_TASK
REPORTED = re.compile(r'current value is \\?"([^"\\]+)\\?"')  # make_tasks.py: FOUND, JSON-escaped in the call


def search_outcome(task: Path, workspace: Path, texts: tuple[str, str] | None) -> str:
    """``texts``: (the summary call's prompt, its response), decoded, when the records hold them."""
    (out, new), = ((p.name, p.read_text().strip()) for p in (task / "reference").iterdir())
    pages = {p.name: p.read_text() for p in (task / "workspace").iterdir()}
    old = next(QUOTED.search(line).group(1) for text in pages.values() for line in text.splitlines()
               if line.startswith("outdated value"))
    found = {p.name: p.read_text() for p in workspace.iterdir() if p.is_file() and p.name not in CHECK_FILES}
    if any(found.get(name) != text for name, text in pages.items()):
        return "page_changed"
    written = found.get(out)
    if written is not None and written.strip() == new:
        return "pass"
    if set(found) - set(pages) - {out}:
        return "wrong_name"
    if written is None:
        return "no_write"
    if written.strip() != old:
        return "garbled_value"
    if texts is None:
        return "outdated"
    prompt, summary = texts
    if f'The current value is "{old}"' in prompt:  # a sub-agent's report, as the main agent read it
        return "outdated_from_sub"
    return "outdated_from_summary" if old in summary else "outdated"


def file_outcome(task: Path, workspace: Path) -> str:
    family = task.name.split("-")[1]
    expected = {p.name: p.read_text().strip() for p in sorted((task / "reference").iterdir())}
    found = {p.name: p.read_text().strip() for p in workspace.iterdir() if p.is_file() and p.name not in CHECK_FILES}
    wrong = [name for name, content in expected.items() if found.get(name) != content]
    if not wrong:
        return "pass"
    extra = set(found) - set(expected)
    if family == "copy":
        source = next(p.name for p in (task / "workspace").iterdir())
        if source in wrong:
            return "source_changed"
        return "wrong_name" if extra else ("no_write" if set(found) == {source} else "garbled_value")
    outdated = set(re.findall(r'outdated "([^"]+)"', (task / "start.md").read_text()))
    kinds = {"missing" if name not in found else "outdated" if found[name] in outdated else "garbled_value"
             for name in wrong}
    if family == "write2" and kinds == {"missing"} and len(wrong) == 1 and not extra:
        return "stopped_early"
    return "+".join(sorted(kinds | ({"wrong_name"} if extra else set())))


def report_kind(reported: str, new: str, old: str) -> str:
    """A report (`Records.reported_value`) as ``current``, ``outdated``, ``mixed`` (words of both), ``garbled`` (a
    value of other words), ``missed`` (no value) or ``none`` (no report)."""
    if reported in ("missed", "none"):
        return reported
    if reported in (new, old):
        return "current" if reported == new else "outdated"
    return "mixed" if set(reported.split("-")) <= set(new.split("-")) | set(old.split("-")) else "garbled"


def report_words(reported: str, new: str, old: str) -> tuple[str, ...]:
    """Each word of a reported value by where it came from: ``current`` or ``outdated`` (that value's word at that
    place), ``swapped`` (a word of either value, from its other place), ``other``; empty when no value was
    reported. Which of the copies out of the page failed, word by word."""
    if reported in ("missed", "none"):
        return ()
    words = (reported.split("-") + ["", ""])[:2]  # one word: the second is "other"; more: the first two
    current, outdated = new.split("-"), old.split("-")
    return tuple("current" if word == current[place] else "outdated" if word == outdated[place]
                 else "swapped" if word in current + outdated else "other" for place, word in enumerate(words))


class Records:
    """An execution's call records, prompts rebuilt from the file's deltas (``gyre.proxy.record_format``), decoded
    with the built-in tokenizer the recipe's models share."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self._tokenizer = None

    def calls(self, execution: str) -> list:
        from gyre.proxy.record_format import read_record_file

        path = self.run / "records" / f"{execution}.jsonl"
        return read_record_file(path, errors=[]) if path.is_file() else []  # a broken line: the calls before it

    def decode(self, ids) -> str:
        if self._tokenizer is None:
            from gyre.models import load_tokenizer

            self._tokenizer = load_tokenizer("small")
        return self._tokenizer.decode(list(ids))

    def summary_texts(self, calls: list) -> tuple[str, str] | None:
        call = next((c for c in calls if c.agent == "main-summary"), None)
        return None if call is None else (self.decode(call.prompt_ids), self.decode(call.response_ids))

    def value_report(self, task: Path, calls: list) -> str:
        """What the sub-agent handed the page holding the value reported (`report_kind`)."""
        return report_kind(*self.reported_value(task, calls))

    def reported_value(self, task: Path, calls: list) -> tuple[str, str, str]:
        """(the value the sub-agent handed the page holding it reported, or ``missed`` / ``none``; the page's current
        value; its outdated one)."""
        value_page, text = next((p, t) for p in (task / "workspace").iterdir() if "current value" in (t := p.read_text()))
        new, old = (LINE_VALUE[kind].search(text).group(1) for kind in ("current", "outdated"))
        for call in calls:
            if call.agent != "sub":
                continue
            response = self.decode(call.response_ids)
            if '"report"' not in response or PAGE_TASK_OF.format(page=value_page.name) not in self.decode(call.prompt_ids):
                continue
            reported = REPORTED.search(response)
            return (reported.group(1) if reported else "missed"), new, old
        return "none", new, old


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path, help="a run folder of +recipe=learn")
    parser.add_argument("--split", choices=["dev", "test", "train"], default="dev")
    parser.add_argument("--every", type=int, default=8, help="versions per row (trainer.val_every for validations)")
    parser.add_argument("--suite", type=Path, default=SUITE,
                        help="the suite the run used: a folder of train/, dev/ and test/ (default: the recipe's)")
    args = parser.parse_args()
    records = Records(args.run)
    rows: dict[int, Counter] = defaultdict(Counter)
    reports: dict[int, Counter] = defaultdict(Counter)
    words_of_reports: dict[int, list[Counter]] = defaultdict(lambda: [Counter(), Counter()])
    for execution in sorted((args.run / "executions").glob(f"{args.split}-*")):
        calls = records.calls(execution.name)
        task = args.suite / args.split / "-".join(execution.name.split("-")[:3])
        if not calls or not task.is_dir():
            continue  # no call made, or not a task of this suite
        family = task.name.split("-")[1]
        workspace = execution / "workspace"
        version = calls[0].weight_version // args.every * args.every
        if family == "search":
            rows[version][f"search:{search_outcome(task, workspace, records.summary_texts(calls))}"] += 1
            reported = records.reported_value(task, calls)  # decoded once for both counts
            reports[version][report_kind(*reported)] += 1
            for place, origin in enumerate(report_words(*reported)):
                words_of_reports[version][place][origin] += 1
        else:
            rows[version][f"{family}:{file_outcome(task, workspace)}"] += 1
    for version, counts in sorted(rows.items()):
        total = sum(counts.values())
        passed = sum(n for key, n in counts.items() if key.endswith(":pass"))
        print(f"versions {version}-{version + args.every - 1}: {total} executions, pass rate {passed / total:.3f}")
        for key, n in sorted(counts.items(), key=lambda item: -item[1]):
            print(f"  {key:40s} {n:4d}")
        if reports[version]:  # where a search execution's value went wrong first: the copy out of the page
            print("  the value page's sub-agent reported: " + ", ".join(
                f"{kind} {n}" for kind, n in sorted(reports[version].items(), key=lambda item: -item[1])))
            if words_of_reports[version][0]:
                print("  its words, first: " + "; second: ".join(", ".join(
                    f"{origin} {n}" for origin, n in sorted(words.items(), key=lambda item: -item[1]))
                    for words in words_of_reports[version]))


if __name__ == "__main__":
    main()
