"""Fresh names at every supervised step: interchangeable words of a demonstration renamed consistently.

A suite whose tasks name things (files, values) teaches a model to copy names from its instruction only if
the names keep changing. Recorded demonstrations repeat the same few thousand names pass after pass, so a
small model fits them instead (it writes a name it saw in training where the instruction gave a new one).
`Renaming` draws a permutation of a list of interchangeable words for each example at each step and
applies it to every prompt and response token of the example, so the same word becomes the same new word
everywhere in the conversation (instruction, tool calls, tool results). The result is the conversation a
task with those names would have recorded, token for token, because every word is one token of the
tokenizer both alone and after a space (checked when the file is read), except where a tool's reply
depends on a name's length (e.g. "wrote 10 characters"): that count keeps its recorded value. Such
context tokens are not trained.

A rename file is JSON: ``{"words": [...], "exclude": [...]}``. ``exclude`` lists strings a renamed example
must never contain (a held-out split's names): a permutation that would produce one is drawn again, so
held-out names stay out of training. Words that occur in the prompt every demonstration shares (a
harness's system prompt and tool schemas) are refused: renaming them would rewrite the prompt.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from gyre.envs.config import project_path
from gyre.trainer.sft_data import SFTExample

MAX_DRAWS = 50  # permutations drawn for one example before it is trained with its recorded names


class RenamingError(ValueError):
    """A rename file that cannot be used; the message names the file and the problem."""


@dataclass
class Renaming:
    plain: np.ndarray  # token id of each word alone ("list", as after a quote or an underscore)
    spaced: np.ndarray  # token id of each word after a space (" list")
    excluded: dict[int, list[tuple[int, ...]]]  # first token -> token sequences no renamed example may hold
    vocab_size: int
    source: str
    kept_as_recorded: int = 0  # examples trained with their recorded names (every draw made an excluded string)

    @classmethod
    def from_file(cls, path: str | Path, tokenizer: Any) -> "Renaming":
        """Read a rename file: a path as given when it exists, else relative to the project root."""
        path = project_path(path)
        try:
            spec = json.loads(path.read_text())
            words, exclude = list(spec["words"]), list(spec.get("exclude", []))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise RenamingError(f"rename file {path}: expected JSON {{\"words\": [...], \"exclude\": [...]}} ({error})") from error
        if len(set(words)) != len(words) or len(words) < 2:
            raise RenamingError(f"rename file {path}: needs at least two distinct words, got {len(words)} ({len(set(words))} distinct)")
        plain, spaced = [], []
        for word in words:
            ids = [tokenizer.encode(text, add_special_tokens=False) for text in (word, " " + word)]
            if any(len(piece) != 1 for piece in ids):
                raise RenamingError(f"rename file {path}: {word!r} is not one token of this tokenizer (alone and after a "
                                    f"space): {ids}; renaming it would not give the tokens a task with the new name records")
            plain.append(ids[0][0])
            spaced.append(ids[1][0])
        excluded: dict[int, list[tuple[int, ...]]] = {}
        for text in exclude:
            for variant in (text, " " + text):
                ids = tuple(tokenizer.encode(variant, add_special_tokens=False))
                if ids:
                    excluded.setdefault(ids[0], []).append(ids)
        return cls(np.array(plain), np.array(spaced), excluded, len(tokenizer), str(path))

    @property
    def word_ids(self) -> np.ndarray:
        return np.concatenate([self.plain, self.spaced])

    def check_prefix(self, prefix: np.ndarray) -> None:
        """Refuse words of the prompt every demonstration shares (renaming them would rewrite it)."""
        found = sorted(set(np.asarray(prefix).tolist()) & set(self.word_ids.tolist()))
        if found:
            raise RenamingError(f"rename file {self.source}: token ids {found} of its words occur in the prompt every "
                                "demonstration shares (system prompt, tool schemas); drop those words from the file")

    def _table(self, rng: random.Random) -> np.ndarray:
        order = list(range(len(self.plain)))
        rng.shuffle(order)
        table = np.arange(max(self.vocab_size, int(self.word_ids.max()) + 1))
        table[self.plain] = self.plain[order]
        table[self.spaced] = self.spaced[order]
        return table

    def holds_excluded(self, ids: np.ndarray) -> bool:
        starts = np.flatnonzero(np.isin(ids, list(self.excluded))) if self.excluded else ()
        for at in starts:
            for sequence in self.excluded[int(ids[at])]:
                if tuple(ids[at:at + len(sequence)].tolist()) == sequence:
                    return True
        return False

    def apply(self, example: SFTExample, rng: random.Random) -> SFTExample:
        """The example with its words renamed by one permutation (drawn again while it makes an excluded
        string); after `MAX_DRAWS` failed draws, the example as recorded."""
        for _ in range(MAX_DRAWS):
            table = self._table(rng)
            calls = [replace(call, prompt_ids=table[np.asarray(call.prompt_ids)].tolist(),
                             response_ids=table[np.asarray(call.response_ids)].tolist()) for call in example.calls]
            if not any(self.holds_excluded(np.asarray(call.prompt_ids + call.response_ids)) for call in calls):
                return replace(example, calls=calls)
        self.kept_as_recorded += 1
        return example
