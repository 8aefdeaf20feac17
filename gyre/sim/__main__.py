"""``python -m gyre.sim +sim=deepswe_122b [sim.policies=[elastic]] [sim.cells=64] ...``

Runs each policy in ``sim.policies`` on the same simulated cluster and workload, prints the table, and
writes ``results.json``, ``metrics_<policy>.jsonl`` (per-step metrics in the real run's schema) and
``roles.png`` into ``sim.output.dir`` (default: Hydra's job folder, ``run_dir`` = ``runs/sim/<date>``, so the
jobs of a ``-m`` sweep do not overwrite each other).
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from gyre.cli import hydra_entry
from gyre.sim.config import ConfigError, validate
from gyre.sim.metrics import write_jsonl
from gyre.sim.report import print_results, write_json, write_png
from gyre.sim.run import simulate


def output_dir(configured: str | None) -> Path:
    if configured is not None:
        return Path(configured)
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


@hydra_entry("sim_config")
def main(cfg: DictConfig) -> None:
    try:
        root = validate(cfg)
    except ConfigError as exc:
        raise SystemExit(f"gyre.sim: {exc}") from None
    results = simulate(root)
    out = root.sim.output
    if out.table:
        print_results(results)
    if out.json or out.png:
        folder = output_dir(out.dir)
        folder.mkdir(parents=True, exist_ok=True)
        if out.json:
            write_json(folder / "results.json", results, OmegaConf.to_container(cfg, resolve=True))
            for result in results:
                write_jsonl(folder / f"metrics_{result.policy}.jsonl", result.step_records)
        if out.png:
            write_png(folder / "roles.png", results)
        print(f"wrote {folder}")


if __name__ == "__main__":
    main()
