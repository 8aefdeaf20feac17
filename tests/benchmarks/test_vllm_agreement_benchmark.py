"""``benchmarks/vllm_agreement.py`` runs as documented and writes its keys; at its smallest size the float32
agreement already meets the target (<= 1e-3)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_agreement_benchmark_writes_its_keys(tmp_path):
    out = tmp_path / "agreement.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/vllm_agreement.py", "--dtypes", "fp32", "--repeats", "1", "--sessions", "4",
         "--prompt", "32", "--turn-tokens", "16", "--min-tokens", "64", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["tokens"] >= 64
    for key in ("vllm_trainer_max_abs_logprob_diff_fp32", "vllm_trainer_max_abs_logprob_diff_fp32_after_load"):
        assert 0 <= result[key] <= 1e-3, (key, result[key])
    assert result["vllm_trainer_mean_abs_logprob_diff_fp32"] <= result["vllm_trainer_max_abs_logprob_diff_fp32"]
