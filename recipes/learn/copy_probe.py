"""Does a checkpoint copy? Its probability of the right words where a `search` execution writes its file.

    python recipes/learn/copy_probe.py CHECKPOINT runs/<run> [--short] [--out probe.json]

Reads the records of a run's `search` executions (a validation's, or any run's), takes each one's last main
call that has its whole prompt (the instruction and the summary, before ``write_file``), appends the right
``write_file`` call and, teacher-forced, reads the probability the model gives each word of the instructed
file name (``path1``, ``path2``) and of the value the summary names (``value1``, ``value2``). A model that
copies puts most of its probability there; one that does not sits at chance (one word of the suite's 45).

Why: the supervised warm start's loss is dominated by the conversation's fixed shape, so a warm start can end
with a low loss and copy nothing (its greedy executions then all write one constant file). This checks it
in seconds instead of a validation run. ``--short`` cuts each prompt as the warm start's short-context phase
does (from the instruction's first name on), for a checkpoint trained only in that phase.
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
SHORT_FROM = 'Task:\n'  # the short-context phase keeps the shared prompt's last token (the newline) onwards
POSITIONS = ("path1", "path2", "value1", "value2")


def write_contexts(run: Path, tokenizer) -> list[tuple[str, tuple[str, ...]]]:
    """(prompt text, the four words) of each recorded search execution's write call."""
    contexts = []
    for records in sorted((run / "records").glob("*.jsonl")):
        calls = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
        whole = [c for c in calls if c.get("agent") == "main" and c.get("prompt_ids")]
        if len(whole) < 2:  # the first main call has no summary yet
            continue
        text = tokenizer.decode(whole[-1]["prompt_ids"])
        path, value = PATH.search(text), SUMMARY_VALUE.search(text)
        if path and value:
            contexts.append((text, (*path.groups(), *value.groups())))
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
    for text, words in contexts:
        if short:
            text = text[text.index(SHORT_FROM) + len(SHORT_FROM) - 1:]
        call = (f'<tool_call>\n{{"name": "write_file", "arguments": {{"path": "{words[0]}_{words[1]}.txt", '
                f'"content": "{words[2]}-{words[3]}"}}}}')
        prompt = tokenizer.encode(text, add_special_tokens=False)
        target = tokenizer.encode(call, add_special_tokens=False)
        with torch.no_grad():
            logp = torch.log_softmax(model(torch.tensor([prompt + target])).logits[0].float(), dim=-1)
        # each word is one token (make_tasks.py picks them so); find it after the previous one
        at = 0
        for position, word in zip(POSITIONS, words):
            token = tokenizer.encode(word, add_special_tokens=False)[0]
            at = target.index(token, at)
            row = logp[len(prompt) + at - 1]
            totals[position][0] += int(row.argmax() == token)
            totals[position][1] += float(row[token])
            totals[position][2] += 1
            at += 1
    return {position: {"tokens": n, "argmax_right": right / n, "geometric_mean_p": math.exp(logp_sum / n)}
            for position, (right, logp_sum, n) in totals.items()}


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
              f"geometric mean p {row['geometric_mean_p']:.3f}")
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
