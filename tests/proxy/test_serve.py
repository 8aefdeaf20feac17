"""``python -m gyre.serve``: starts engines and the proxy, prints URLs and keys, serves, records."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_serve_prints_urls_and_keys_and_serves(tmp_path: Path) -> None:
    command = [
        sys.executable, "-m", "gyre.serve", "model.path=tiny", "proxy.port=0", "serve.cells=2", "serve.executions=2",
        f"run_dir={tmp_path}", "serve.torch_threads=1", "serve.duration_s=60",
    ]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line)
            if "records:" in line:
                break
        text = "".join(lines)
        openai_url = re.search(r"OpenAI base URL:\s+(http://\S+/v1)", text)
        anthropic_url = re.search(r"Anthropic base URL:\s+(http://\S+)", text)
        keys = re.findall(r"key for execution (\S+): (\S+)", text)
        assert openai_url and anthropic_url and [name for name, _ in keys] == ["serve", "serve-1"], text
        body = {"model": "anything", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        response = httpx.post(f"{openai_url.group(1)}/chat/completions", json=body, headers={"authorization": f"Bearer {keys[1][1]}"}, timeout=60)
        assert response.status_code == 200, response.text
        record = json.loads((tmp_path / "records" / "serve-1.jsonl").read_text().splitlines()[0])
        assert len(record["response_ids"]) == response.json()["usage"]["completion_tokens"]
    finally:
        process.terminate()
        assert process.wait(30) == 0
    bad = subprocess.run([sys.executable, "-m", "gyre.serve", "proxy.no_such_key=1"], cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode != 0 and "no_such_key" in bad.stdout + bad.stderr  # unknown keys fail loudly


@pytest.mark.parametrize(("key", "new"), [("cells", "serve.cells"), ("torch_threads", "serve.torch_threads"), ("engine", "rollout.kind")])
def test_serve_keys_that_moved_fail_naming_the_new_key(key, new):
    from hydra import compose, initialize_config_dir

    from gyre.config import ConfigError
    from gyre.serve import make_engines
    from gyre.sim.config import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="serve", overrides=[f"rollout.{key}=2"])
    with pytest.raises(ConfigError, match=rf"rollout\.{key} moved to {new}"):
        make_engines(cfg)
