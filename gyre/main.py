"""Entry point: ``python -m gyre.main +recipe=deepswe`` (Hydra; see conf/config.yaml)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from gyre.trainer.launch import run

    run(cfg)


if __name__ == "__main__":
    main()
