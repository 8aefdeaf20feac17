"""Config: every key documented, every preset valid, unknown or bad keys fail naming themselves."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from gyre.sim.config import CONF_DIR, PRESETS, ConfigError, load_config, validate
from gyre.sim.rates import tree_token_ratio
from gyre.sim.world import World


def _key_lines(path):
    for line in path.read_text().splitlines():
        if re.match(r"^\s*[\w\"]+\s*:", line) and not line.lstrip().startswith("#"):
            yield line


@pytest.mark.parametrize("name", ["sim_config.yaml", *(f"sim/{p}.yaml" for p in PRESETS)])
def test_every_key_has_a_comment(name):
    path = CONF_DIR / name
    missing = [line for line in _key_lines(path) if "#" not in line and not line.startswith("defaults")]
    assert not missing, f"{name}: keys without a comment: {missing}"


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_load_and_build_a_world(preset):
    root = load_config(preset)
    world = World(root)
    assert world.rates.capacity >= 1
    assert world.rates.mean_duration(world.rates.capacity) > 0


def test_published_settings_are_kept():
    root = load_config("nl2repo_2t")
    assert root.sim.steps == 48
    assert root.sim.switch.rollout_to_train_s == 8.52 and root.sim.switch.train_to_rollout_s == 3.46
    world = World(root)
    assert 550_000 < world.means["prefill"] + world.means["decode"] < 850_000  # ~700K-token executions
    assert root.sim.train.tree_token_ratio["5"] == 0.748


def test_unknown_key_on_the_command_line_fails_naming_it():
    with pytest.raises(Exception, match="sim.bogus"):
        load_config(overrides=["sim.bogus=1"])
    with pytest.raises(ConfigError, match="sim.rollout.bogus"):
        load_config(overrides=["+sim.rollout.bogus=1"])  # forced past Hydra: the schema still rejects it


def test_unknown_or_missing_key_in_a_preset_fails_naming_it():
    raw = OmegaConf.to_container(OmegaConf.structured(load_config()))
    raw["sim"]["workload"]["calls_meen"] = 3
    with pytest.raises(ConfigError, match="sim.workload.calls_meen"):
        validate(raw)
    raw["sim"]["workload"].pop("calls_meen")
    raw["sim"]["train"].pop("weight_sync_s")
    with pytest.raises(ConfigError, match="sim.train.weight_sync_s"):
        validate(raw)


@pytest.mark.parametrize("override, key", [
    ("scheduler.stale_policy=ignore", "scheduler.stale_policy"),
    ("sim.policies=[greedy]", "sim.policies"),
    ("sim.rollout.engines_per_cell=3", "sim.rollout.engines_per_cell"),
    ("sim.cells=abc", "sim.cells"),
    ("scheduler.rollout_cells=16", "scheduler.rollout_cells"),
    ("sim.group_size=5", "sim.group_size"),
    ("scheduler.stream_from=5", "scheduler.stream_from"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError, match=re.escape(key)):
        load_config(overrides=[override])


def test_tree_token_ratio_per_cap_and_clear_error_for_an_unknown_cap():
    table = load_config().sim.train.tree_token_ratio
    assert tree_token_ratio(table, 5) == 0.748
    assert tree_token_ratio(table, None) == 1.0
    with pytest.raises(ConfigError, match=r"trajectory.max_paths=3 .*known caps: 1, 2, 5, 10, uncapped"):
        tree_token_ratio(table, 3)


def test_model_that_does_not_fit_an_engine_is_a_clear_error():
    root = load_config(overrides=["sim.model.total_params_b=2000", "sim.rollout.engines_per_cell=8"])
    with pytest.raises(ConfigError, match="do not fit"):
        World(root)
