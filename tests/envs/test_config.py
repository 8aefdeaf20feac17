"""The ``env`` config group: every yaml loads into an `EnvConfig`, every key is commented, unknown keys
fail loudly."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from gyre.envs.config import EnvConfig

CONF = Path(__file__).resolve().parents[2] / "conf" / "env"
FILES = sorted(CONF.glob("*.yaml"))


def test_there_is_one_config_per_suite() -> None:
    assert {f.stem for f in FILES} >= {"deepswe", "nl2repo", "terminalbench"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_config_builds_and_loads_tasks(path: Path) -> None:
    config = EnvConfig.from_config(OmegaConf.load(path))
    result = config.load()
    assert result.errors == [] and len(result.tasks) >= 30
    assert config.sandbox.kind in ("auto", "bwrap", "process")


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_key_is_commented(path: Path) -> None:
    lines = path.read_text().splitlines()
    for number, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or ":" not in stripped:
            continue
        previous = lines[number - 1].strip() if number else ""
        assert previous.startswith("#") or " # " in line, f"{path.name}:{number + 1}: key without a comment: {line!r}"
    assert isinstance(yaml.safe_load(path.read_text()), dict)


def test_unknown_keys_fail_loudly() -> None:
    base = OmegaConf.to_container(OmegaConf.load(CONF / "deepswe.yaml"))
    with pytest.raises(ValueError, match="retries"):
        EnvConfig.from_config({**base, "retries": 3})
    with pytest.raises(ValueError, match="tests_root"):
        EnvConfig.from_config({**base, "loader": {"tests_root": "x"}})
    with pytest.raises(ValueError, match="cpu_secs"):
        EnvConfig.from_config({**base, "sandbox": {"cpu_secs": 1}})
    with pytest.raises(ValueError, match="domain"):
        EnvConfig.from_config({**base, "domain": "chess"})


def test_envs_does_not_import_torch() -> None:
    """gyre.envs runs processes and scores workspaces; it must stay light (no torch)."""
    import subprocess
    import sys

    code = "import sys, gyre.envs, gyre.envs.config, gyre.envs.scorers; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_missing_suite_path_says_it_does_not_exist(tmp_path) -> None:
    config = EnvConfig.from_config({"domain": "swe", "path": str(tmp_path / "no_such_suite")})
    with pytest.raises(FileNotFoundError, match=r"env.path='.*no_such_suite' does not exist"):
        config.load()
    held_out = EnvConfig.from_config({"domain": "swe", "path": str(tmp_path), "val_path": str(tmp_path / "gone")})
    with pytest.raises(FileNotFoundError, match=r"env.val_path='.*gone' does not exist"):
        held_out.load_val()
