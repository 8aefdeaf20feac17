"""Config checks of the trainer and scheduler groups: staleness keys live in the scheduler group (their old place in
the trainer group fails naming the new key); PPO epochs that could not train fail naming the keys."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from gyre.config import ConfigError, build
from gyre.scheduler import SchedulerConfig
from gyre.sim.config import CONF_DIR
from gyre.job import loop_config


def composed(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(config_name="config", overrides=["+recipe=deepswe", *overrides])


@pytest.mark.parametrize("scheduler", ["elastic", "async", "colocate"])
def test_every_scheduler_config_carries_the_staleness_keys(scheduler):
    cfg = composed(f"scheduler={scheduler}", "scheduler.max_staleness=2", "scheduler.stale_policy=drop")
    built = build(SchedulerConfig, cfg.scheduler, "scheduler")
    assert (built.max_staleness, built.stale_policy) == (2, "drop")
    assert composed(f"scheduler={scheduler}").scheduler.stale_policy == "keep"  # the default trains long executions


@pytest.mark.parametrize("key, value", [("max_staleness", 2), ("stale_policy", "drop")])
def test_the_old_trainer_keys_fail_naming_the_new_ones(key, value):
    cfg = composed(f"trainer.{key}={value}")
    with pytest.raises(ConfigError, match=rf"trainer.{key} moved to scheduler.{key}"):
        loop_config(cfg)
    assert loop_config(composed()).total_steps >= 1  # left alone, the trainer section builds


def test_the_removed_extra_key_fails_naming_it():
    cfg = composed("+scheduler.extra.a=1")
    with pytest.raises(ConfigError, match=r"scheduler\.extra: unknown key"):
        build(SchedulerConfig, cfg.scheduler, "scheduler")



@pytest.mark.parametrize("overrides, message", [
    (["trainer.ppo_epochs=0"], r"trainer.ppo_epochs must be >= 1"),
    (["trainer.ppo_epochs=2", "algo.proximal=recompute"], r"ppo_epochs=2 needs algo.proximal=behavior"),
])
def test_ppo_epochs_that_cannot_train_fail_naming_the_keys(overrides, message):
    with pytest.raises(ValueError, match=message):
        loop_config(composed(*overrides))
    assert loop_config(composed("trainer.ppo_epochs=3")).ppo_epochs == 3
