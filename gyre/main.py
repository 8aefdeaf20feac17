"""Entry point: ``python -m gyre.main +recipe=deepswe`` (Hydra; see conf/config.yaml)."""

from __future__ import annotations

from omegaconf import DictConfig

from gyre.cli import hydra_entry


@hydra_entry("config")
def main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import open_dict

    from gyre.job import run

    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode == RunMode.MULTIRUN:
        # A sweep point's run folder is its Hydra job folder: named by its overrides, holding .hydra/ (the
        # composed config and overrides); `python -m gyre.compare <sweep folder>` plots the points together.
        with open_dict(cfg):
            cfg.run_dir = hydra_cfg.runtime.output_dir
    run(cfg)


if __name__ == "__main__":
    main()
