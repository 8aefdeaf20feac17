"""``algo.kl_coef > 0`` needs a reference model: a job without one refuses it at config time, naming the key;
``LossConfig`` itself still takes it (a caller that passes a reference model trains with it)."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir

from gyre.algo.losses import LossConfig, check_no_reference
from gyre.config import ConfigError, build
from gyre.sim.config import CONF_DIR


def algo_section(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        return compose(config_name="config", overrides=["+recipe=deepswe", *overrides]).algo


def test_kl_without_a_reference_model_fails_at_config_time_naming_the_key():
    loss = build(LossConfig, algo_section("algo.kl_coef=0.05"), "algo")  # valid on its own
    assert loss.kl_coef == 0.05
    with pytest.raises(ConfigError, match=r"algo\.kl_coef=0\.05 needs a frozen reference model.*set algo\.kl_coef=0"):
        check_no_reference(loss)
    check_no_reference(build(LossConfig, algo_section(), "algo"))  # the default (0) needs none
