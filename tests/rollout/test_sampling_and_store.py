"""Unit tests of the engine's small parts: nucleus truncation, row sampling, the LRU session store."""

from __future__ import annotations

import pytest
import torch

from gyre.rollout.base import InvalidTokenError
from gyre.rollout.base import common_prefix_length
from gyre.rollout.kv_store import SessionKV, SessionStore
from gyre.rollout.metrics import ThroughputMeter
from gyre.rollout.sampling import RowSampler, _nucleus, check_token_ids, sample_rows


def test_nucleus_keeps_the_smallest_top_set_reaching_top_p():
    probs = torch.tensor([0.2, 0.5, 0.3])
    assert _nucleus(probs, 0.6).tolist() == pytest.approx([0.0, 0.5, 0.3])
    assert _nucleus(probs, 0.5).tolist() == pytest.approx([0.0, 0.5, 0.0])  # the top token always stays
    assert _nucleus(probs, 1.0).tolist() == pytest.approx([0.2, 0.5, 0.3])


def test_sampled_tokens_stay_in_the_nucleus_and_report_unnormalised_logprobs():
    logits = torch.log(torch.tensor([[0.05, 0.6, 0.35]])).repeat(200, 1)
    generator = torch.Generator().manual_seed(0)
    rows = [RowSampler(1.0, 0.9, generator)] * 200
    tokens, logprobs = sample_rows(logits, rows)
    assert set(tokens) <= {1, 2} and set(tokens) == {1, 2}
    expected = torch.log_softmax(logits[0], -1)
    assert all(lp == pytest.approx(float(expected[t]), abs=1e-6) for t, lp in zip(tokens, logprobs, strict=True))


def test_greedy_rows_take_the_argmax_and_report_t1_logprobs():
    logits = torch.tensor([[0.1, 2.0, 1.0], [3.0, 0.0, 0.0]])
    tokens, logprobs = sample_rows(logits, [RowSampler(0.0, 1.0, None)] * 2)
    assert tokens == [1, 0]
    assert logprobs[0] == pytest.approx(float(torch.log_softmax(logits[0], -1)[1]))


def test_check_token_ids_accepts_index_types_and_names_the_bad_one():
    assert check_token_ids([1, torch.tensor(2).item(), 3], 10, "ids") == [1, 2, 3]
    with pytest.raises(InvalidTokenError, match=r"ids\[1\] = 10"):
        check_token_ids([1, 10], 10, "ids")
    with pytest.raises(InvalidTokenError, match=r"ids\[0\] = True"):
        check_token_ids([True], 10, "ids")


def entry(tokens: int) -> SessionKV:
    return SessionKV(list(range(tokens)), [(torch.zeros(1, tokens, 2), torch.zeros(1, tokens, 2))], 0)


def test_store_evicts_least_recently_used_within_the_budget():
    store = SessionStore(max_tokens=10)
    store.put("a", entry(4))
    store.put("b", entry(4))
    store.put("a", store.take("a"))  # a used again: b is now the oldest
    store.put("c", entry(4))
    assert store.session_ids() == ["a", "c"] and store.total_tokens == 8 and store.evictions == 1
    store.evict(reserved=5)  # running calls hold 5 tokens: only one idle entry fits
    assert store.session_ids() == ["c"]
    store.put("big", entry(11))  # larger than the whole budget: dropped, not kept over the bound
    assert "big" not in store and store.total_tokens <= 10


def test_truncated_and_compacted_entries():
    full = entry(6)
    cut = full.truncated(3)
    assert cut.tokens == [0, 1, 2] and cut.layers[0][0].shape == (1, 3, 2)
    compact = cut.compacted()
    assert compact.layers[0][0].untyped_storage().nbytes() == 3 * 2 * 4
    assert common_prefix_length([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix_length([1], [1, 2]) == 1


def test_throughput_meter_uses_the_union_of_busy_spans():
    meter = ThroughputMeter(window_s=10)
    meter.record(0.0, 1.0, 10)
    meter.record(0.5, 1.5, 10)
    meter.record(3.0, 4.0, 10)
    assert meter.rate(now=4.0) == pytest.approx(30 / 2.5)
    assert meter.rate(now=100.0) == 0.0
