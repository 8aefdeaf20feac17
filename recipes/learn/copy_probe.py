"""Does a checkpoint copy? Its probability of the right words where a `search` execution copies them.

    python recipes/learn/copy_probe.py CHECKPOINT runs/<run> [--short] [--out probe.json]

Reads the records of a run's `search` executions (a validation's, or any run's) and, teacher-forced, reads the
probability the model gives each copied word at two places:

- the write call: each execution's first main call after the summary rewrote its conversation (the
  instruction and the summary, before ``write_file``), with the right ``write_file`` call appended: the words of the instructed file name
  (``path1``, ``path2``, copied from the instruction) and of the value the summary names (``value1``,
  ``value2``, copied from the summary);
- the report: the sub-agent that read the page holding the value, with the right ``report`` appended: the words
  of the current value (``report1``, ``report2``), copied out of a tool's output; and ``report1_either``, the
  probability of the current or the outdated value's first word there (for a warm start of a suite whose
  demonstrator reports the outdated one, ``--report-mistake outdated``: a model that copies puts its mass on the
  two, one that garbles elsewhere);
- the summary: the main agent's summary call, with the value a sub-agent reported (as the records hold it)
  appended as the summary's text: its words (``summary1``, ``summary2``), copied out of the six reports.

A model that copies puts most of its probability there; one that does not sits at chance (one word of the
suite's 45).

And ``write_decision``, at the write call's tool name: the probability of ``write_file`` against ``finish``
(finishing without writing: a mistake the demonstrator makes on purpose, which the warm start learns with it).
``argmax_right`` is the share of executions where ``write_file`` is the likelier of the two: greedy decoding writes
there. The same for every task, so a warm start's greedy pass rate hangs on it (recipes/learn/README.md, "The warm
start's greedy figure sits on one decision").

Why: the supervised warm start's loss is dominated by the conversation's fixed shape, so a warm start can end
with a low loss and copy nothing (its greedy executions then all write one constant file). This checks it
in seconds instead of a validation run. ``--short`` cuts each prompt as the warm start's short-context phase
does (from the task's own text on), for a checkpoint trained only in that phase.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections import defaultdict
from pathlib import Path

PATH = re.compile(r'new file "([a-z]+)_([a-z]+)\.txt"')
SUMMARY_VALUE = re.compile(r'Summary of your work so far:\nThe current value is "([a-z]+)-([a-z]+)"')
PAGE_VALUE = re.compile(r'\ncurrent value: "([a-z]+)-([a-z]+)"')  # a page's line (make_tasks.py: CURRENT_LINE)
PAGE_OUTDATED = re.compile(r'\noutdated value: "([a-z]+)-([a-z]+)"')  # (OUTDATED_LINE)
# the short-context phase keeps the shared prompt's last token (the newline) onwards
SHORT_FROM = {"main": "Task:\n", "main-summary": "Task:\n", "sub": "<|im_start|>user\n"}
REPORTED = re.compile(r'<tool_response>\nThe current value is "([a-z]+)-([a-z]+)"\.')  # a report, as the main agent reads it
WORDS_AT = {"main": ("path1", "path2", "value1", "value2"), "sub": ("report1", "report2"),
            "main-summary": ("summary1", "summary2")}
POSITIONS = (*WORDS_AT["main"], *WORDS_AT["sub"], "report1_either", *WORDS_AT["main-summary"])
TOOL_NAME_AT = '<tool_call>\n{"name": "'  # the tool name's first token comes next


def write_contexts(run: Path, tokenizer) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(agent, prompt text, the right call, its copied words) of each recorded search execution's write call and
    of the report of its sub-agent that read the value."""
    from gyre.proxy.record_format import read_record_file

    contexts = []
    for records in sorted((run / "records").glob("*.jsonl")):
        prompts = [(call.agent, tokenizer.decode(list(call.prompt_ids))) for call in read_record_file(records)]
        # the first main call after the summary rewrote the conversation: where the file is written
        text = next((text for agent, text in prompts if agent == "main" and SUMMARY_VALUE.search(text)), "")
        path, value = PATH.search(text), SUMMARY_VALUE.search(text)
        if path and value:
            a, b, c, d = (*path.groups(), *value.groups())
            contexts.append(("main", text, f'<tool_call>\n{{"name": "write_file", "arguments": {{"path": "{a}_{b}.txt", '
                                            f'"content": "{c}-{d}"}}}}', (a, b, c, d)))
        for agent, text in prompts:  # the sub-agent whose page holds the value, at its report (after the page)
            if agent == "sub" and "<tool_response>" in text and (found := PAGE_VALUE.search(text)):
                a, b = found.groups()
                outdated = PAGE_OUTDATED.search(text).group(1)
                contexts.append(("sub", text, f'<tool_call>\n{{"name": "report", "arguments": {{"report": '
                                              f'"The current value is \\"{a}-{b}\\"."}}}}', (a, b, outdated)))
        for agent, text in prompts:  # the summary, copying the value a sub-agent reported (as it reported it)
            if agent == "main-summary" and (reported := REPORTED.search(text)):
                a, b = reported.groups()
                contexts.append(("main-summary", text, f'The current value is "{a}-{b}".', (a, b)))
    return contexts


def probe(checkpoint: str, run: Path, short: bool = False) -> dict[str, dict[str, float]]:
    import torch

    from gyre.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(checkpoint)
    model.eval()
    contexts = write_contexts(run, tokenizer)
    if not contexts:
        raise SystemExit(f"{run}: no recorded search execution with a write call after its summary")
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0])  # argmax right, sum of log p, tokens
    name_at = len(tokenizer.encode(TOOL_NAME_AT, add_special_tokens=False))
    write, finish = (tokenizer.encode(name, add_special_tokens=False)[0] for name in ("write_file", "finish"))
    decision_p: list[tuple[float, float]] = []  # (p write_file, p finish) at each write call
    for agent, text, call, words in contexts:
        if short:
            text = text[text.index(SHORT_FROM[agent]) + len(SHORT_FROM[agent]) - 1:]
        prompt = tokenizer.encode(text, add_special_tokens=False)
        target = tokenizer.encode(call, add_special_tokens=False)
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt + target])).logits[0].float(), dim=-1)
        if agent == "main":
            if target[name_at] != write:  # the tokenizer splits the call otherwise: the probe would read elsewhere
                raise SystemExit(f"{checkpoint}: the write call's tool name is not token {name_at} of the call")
            row = logp[len(prompt) + name_at - 1].exp()
            decision_p.append((float(row[write]), float(row[finish])))
        # each word is one token (make_tasks.py picks them so); find it after the previous one
        at = 0
        for position, word in zip(WORDS_AT[agent], words):
            token = tokenizer.encode(word, add_special_tokens=False)[0]
            at = target.index(token, at)
            row = logp[len(prompt) + at - 1]
            totals[position][0] += int(row.argmax() == token)
            totals[position][1] += float(row[token])
            totals[position][2] += 1
            if position == "report1":  # the current or the outdated value's first word
                either = {token, tokenizer.encode(words[2], add_special_tokens=False)[0]}
                totals["report1_either"][0] += int(int(row.argmax()) in either)
                totals["report1_either"][1] += float(torch.logsumexp(row[sorted(either)], 0))
                totals["report1_either"][2] += 1
            at += 1
    figures = {position: {"tokens": n, "argmax_right": right / n, "geometric_mean_p": math.exp(logp_sum / n)}
               for position, (right, logp_sum, n) in totals.items()}
    if decision_p:
        n = len(decision_p)
        figures["write_decision"] = {
            "tokens": n, "argmax_right": sum(w > f for w, f in decision_p) / n,
            "geometric_mean_p": math.exp(sum(math.log(max(w, 1e-30)) for w, _ in decision_p) / n),
            "mean_p_write": sum(w for w, _ in decision_p) / n, "mean_p_finish": sum(f for _, f in decision_p) / n}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="an HF checkpoint folder (or a built-in model)")
    parser.add_argument("run", type=Path, help="a run folder with records/ of search executions")
    parser.add_argument("--short", action="store_true", help="cut each prompt as the short-context phase does")
    parser.add_argument("--out", type=Path, default=None, help="write the figures here as JSON")
    args = parser.parse_args()
    figures = probe(args.checkpoint, args.run, args.short)
    for position, row in figures.items():
        print(f"{position}: {row['tokens']} tokens, argmax right {row['argmax_right']:.3f}, "
              f"geometric mean p {row['geometric_mean_p']:.3f}"
              + (f", mean p write_file {row['mean_p_write']:.3f}, finish {row['mean_p_finish']:.3f}"
                 if position == "write_decision" else ""))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
