"""``python -m gyre.serve rollout=vllm`` (vLLM's CPU build here): the proxy over a vLLM engine serves Gyre's
reference agent, records every call token-exact, and the recorded log-probs are the served model's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gyre.models import VLLM_CPU_MODEL

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def test_serve_on_vllm_serves_the_reference_agent(tmp_path: Path) -> None:
    from gyre.models import load_model
    from gyre.proxy.record_format import read_record_file

    command = [
        sys.executable, "-m", "gyre.serve", "rollout=vllm", f"model.path={VLLM_CPU_MODEL}", "proxy.port=0",
        f"run_dir={tmp_path / 'serve'}", "serve.duration_s=300", "rollout.dtype=float32",
        "rollout.max_cached_tokens=32768", "rollout.enforce_eager=true",
    ]
    server = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        assert server.stdout is not None
        for line in server.stdout:
            lines.append(line)
            if "records:" in line:
                break
        text = "".join(lines)
        url = re.search(r"OpenAI base URL:\s+(http://\S+/v1)", text)
        key = re.search(r"key for execution serve: (\S+)", text)
        assert url and key, text[-3000:]
        workspace = tmp_path / "workspace"
        workspace.mkdir()
        agent = subprocess.run(
            [sys.executable, "-m", "gyre.harness.reference", "--instruction", "Create hello.txt containing hi",
             "--workspace", str(workspace), "--max-turns", "2", "--max-tokens", "32", "--no-sub-agent"],
            env={**os.environ, "OPENAI_BASE_URL": url.group(1), "OPENAI_API_KEY": key.group(1)},
            capture_output=True, text=True, check=False, timeout=300)
        assert agent.returncode in (0, 10), agent.stdout + agent.stderr  # finished, or ran out of turns
    finally:
        server.terminate()
        rest = server.communicate(timeout=120)[0]
    assert server.returncode == 0, rest[-3000:]
    assert "TypeError" not in rest  # vLLM's shutdown at interpreter exit stays quiet

    calls = read_record_file(tmp_path / "serve" / "records" / "serve.jsonl")
    assert len(calls) >= 2 and all(call.response_ids and call.weight_version == 0 for call in calls)
    model = load_model(VLLM_CPU_MODEL).eval()
    for call in calls:
        with torch.no_grad():
            logits = model(torch.tensor([call.prompt_ids + call.response_ids])).logits[0, len(call.prompt_ids) - 1: -1]
        expected = torch.log_softmax(logits.float(), -1)[torch.arange(len(call.response_ids)), torch.tensor(call.response_ids)]
        torch.testing.assert_close(torch.tensor(call.response_logprobs), expected, atol=1e-3, rtol=0)
