"""Next-token choice and behaviour log-probs, one row per in-flight call.

The convention, shared with the trainer's recomputation: the log-prob reported for a sampled token is
``log_softmax(logits / T)[token]`` with ``T = temperature`` (``T = 1`` for greedy), taken *before* top-p
truncation. Top-p only narrows which tokens may be drawn; it does not renormalise the reported log-prob.
The trainer recomputes exactly ``log_softmax(logits / T)`` from a forward pass, so the two agree up to
float noise whatever ``top_p`` was.
"""

from __future__ import annotations

import operator
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from gyre.rollout.base import InvalidTokenError, SamplingParams


@dataclass
class RowSampler:
    """How one call draws its tokens: its parameters and its own random stream.

    A per-call ``torch.Generator`` (seeded from ``seed``, or from the OS when ``seed`` is None) makes a
    seeded call reproducible however the engine batches it with others.
    """

    temperature: float
    top_p: float
    generator: torch.Generator | None

    @classmethod
    def from_params(cls, params: SamplingParams, device: torch.device | str) -> RowSampler:
        if params.temperature == 0.0:
            return cls(0.0, 1.0, None)
        generator = torch.Generator(device=device)
        generator.manual_seed(params.seed if params.seed is not None else secrets.randbits(63))
        return cls(float(params.temperature), float(params.top_p), generator)


def sample_rows(logits: torch.Tensor, rows: Sequence[RowSampler]) -> tuple[list[int], list[float]]:
    """Choose one token per row of ``logits`` ``[B, V]``; return the tokens and their log-probs.

    Greedy rows (temperature 0) take the argmax of the raw logits, which is what transformers'
    ``generate(do_sample=False)`` does, and report ``log_softmax(logits)`` (T = 1).
    """
    logits = logits.float()
    temps = torch.tensor([r.temperature if r.temperature > 0 else 1.0 for r in rows], device=logits.device)
    logprobs = torch.log_softmax(logits / temps[:, None], dim=-1)
    tokens: list[int] = []
    for i, row in enumerate(rows):
        if row.temperature == 0.0:
            tokens.append(int(torch.argmax(logits[i])))
            continue
        probs = logprobs[i].exp()
        if row.top_p < 1.0:
            probs = _nucleus(probs, row.top_p)
        tokens.append(int(torch.multinomial(probs, 1, generator=row.generator)))
    index = torch.tensor(tokens, device=logits.device)[:, None]
    return tokens, logprobs.gather(1, index)[:, 0].tolist()


def _nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero every token outside the smallest top set whose mass reaches ``top_p`` (the top token stays)."""
    sorted_probs, order = torch.sort(probs, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=0) - sorted_probs
    sorted_probs = torch.where(mass_before < top_p, sorted_probs, torch.zeros_like(sorted_probs))
    return torch.zeros_like(probs).scatter(0, order, sorted_probs)


def check_token_ids(ids: Iterable[int], vocab_size: int, what: str) -> list[int]:
    """The ids as plain ints; ``InvalidTokenError`` names ``what`` and the first id outside the vocab.

    A sequence that knows its smallest and largest id (``bounds()``, e.g. the proxy's ``TokenSeq``) or a
    numpy integer array is checked without a Python loop over its tokens."""
    bounds = getattr(ids, "bounds", None)
    if callable(bounds) and hasattr(ids, "tolist"):
        low_high = bounds()
        if low_high is None or (0 <= low_high[0] and low_high[1] < vocab_size):
            return ids.tolist()  # type: ignore[union-attr]
    elif isinstance(ids, np.ndarray) and ids.ndim == 1 and np.issubdtype(ids.dtype, np.integer):
        if ids.size == 0 or (0 <= int(ids.min()) and int(ids.max()) < vocab_size):
            return ids.tolist()
    checked: list[int] = []
    for position, token in enumerate(ids):
        try:
            value = operator.index(token) if not isinstance(token, bool) else None
        except TypeError:
            value = None
        if value is None or not 0 <= value < vocab_size:
            raise InvalidTokenError(
                f"{what}[{position}] = {token!r} is not a token id of this model (vocab size {vocab_size})"
            )
        checked.append(value)
    return checked
