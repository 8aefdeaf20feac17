"""The run's checkpoints: the core's policy and optimizer (``gyre.replica.checkpoint``) with the driver's
position beside them (``driver.json``: steps done, the task sampler's position, the policy version), and
resuming from the latest one.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gyre.trainer.fit import Driver

log = logging.getLogger(__name__)


async def save(driver: Driver) -> None:
    """An HF folder of the policy + optimizer (the core's), with the driver's position beside it; ``latest``
    moves only once the whole checkpoint is written."""
    from gyre.replica.checkpoint import mark_latest, step_folder

    folder = step_folder(driver.run_dir / "checkpoints", driver.steps_done)
    await driver.cluster.save(str(folder))
    position = {"steps_done": driver.steps_done, "sampler_position": driver.sampler.position,
                "version": driver.cluster.version}
    (folder / "driver.json").write_text(json.dumps(position))
    mark_latest(folder)


async def resume(driver: Driver) -> bool:
    from gyre.replica.checkpoint import latest_checkpoint

    folder = latest_checkpoint(driver.run_dir / "checkpoints")
    if folder is None:
        return False
    position = json.loads((folder / "driver.json").read_text())
    await driver.cluster.load(str(folder))
    driver.steps_done = position["steps_done"]
    driver.sampler.position = position["sampler_position"]
    log.info("resumed from %s: step %d, policy version %d", folder, driver.steps_done, driver.cluster.version)
    return True
