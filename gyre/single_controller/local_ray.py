"""This machine's own Ray instance, for a job (or benchmark) run without a cluster to join.

It is the node ``ray.init(address="local")`` starts (Ray's own defaults: every CPU, Ray's object store size, a
reaper and kernel fate-sharing so that nothing of it outlives a killed driver) with one difference: its agents'
ports are chosen here (``gyre.ports``), so that a loaded machine cannot abort its start (ray-project/ray#65983:
the raylet waits a fixed ~15 s for agents left to pick their own ports). ``ray.init`` takes no agent ports, so
the node is started as ``ray.init`` and ``ray.cluster_utils`` start theirs (``ray._private.node.Node``), and this
process then joins it.
"""

from __future__ import annotations

import atexit
from typing import Any

from gyre.ports import agent_ports


def start_node(ports: dict[str, int], **params: Any) -> Any:
    """A head node as ``ray.init`` starts its local one, on the given agent ports; ``params`` are more ``RayParams``.
    Nothing connects to it: its processes run until ``kill_all_processes()``, or, with this process killed, until
    the kernel or Ray's reaper stops them."""
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    # dashboard_port=None as ray.init's: its (minimal) dashboard head tries the next ports when 8265 is taken
    ray_params = RayParams(include_dashboard=False, dashboard_port=None, **ports, **params)
    # as ray.init's: no SIGTERM handler of Ray's in this process (shutdown_at_exit=False), its processes
    # stopped by kill_all_processes or, with this process killed, by the kernel or Ray's reaper (spawn_reaper)
    return Node(ray_params, head=True, shutdown_at_exit=False, spawn_reaper=True)


class LocalRay:
    """Starts a local Ray node and connects this process to it; ``shutdown()`` (or this process's exit) ends both."""

    def __init__(self, *, num_cpus: int | None = None, runtime_env: dict[str, Any] | None = None) -> None:
        import ray

        self.agent_ports = agent_ports()[0]
        self.node = start_node(self.agent_ports, num_cpus=num_cpus)
        atexit.register(self.shutdown)
        try:
            ray.init(address=self.node.gcs_address, log_to_driver=False, configure_logging=False,
                     runtime_env=runtime_env)
        except BaseException:
            self.shutdown()
            raise

    def shutdown(self) -> None:
        """Disconnects this process and stops the node's processes (a second call does nothing more)."""
        import ray

        atexit.unregister(self.shutdown)
        ray.shutdown()
        self.node.kill_all_processes(check_alive=False, allow_graceful=True)

    def __enter__(self) -> LocalRay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
