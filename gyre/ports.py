"""Free ports: for the processes Gyre starts that listen (a weight-transfer store, a Ray head), and for the agents
of a Ray node Gyre starts, chosen here rather than by Ray.

Left to Ray (port 0), a raylet waits for its dashboard and runtime-env agents to write their ports to files and
aborts after a fixed ~15 s (ray-project/ray#65983). On a loaded machine (sandboxes, a CI run beside other work)
the agents' imports take longer, the raylet dies and the node never starts: "The current node timed out during
startup". Given ports, the raylet does not wait for them.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack

AGENT_PORTS = {  # Ray's node parameter -> the `ray start` flag that sets it
    "metrics_agent_port": "--dashboard-agent-grpc-port",
    "dashboard_agent_listen_port": "--dashboard-agent-listen-port",
    "metrics_export_port": "--metrics-export-port",
    "runtime_env_agent_port": "--runtime-env-agent-port",
}


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """``count`` distinct free ports (each held until all are chosen, so none is handed out twice)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]


def agent_ports(nodes: int = 1) -> list[dict[str, int]]:
    """For each of ``nodes`` Ray nodes, its agents' ports as node parameters (``ray.cluster_utils``' node args)."""
    ports = iter(free_ports(nodes * len(AGENT_PORTS)))
    return [{name: next(ports) for name in AGENT_PORTS} for _ in range(nodes)]


def agent_port_flags() -> list[str]:
    """One node's agents' ports as `ray start` flags."""
    return [f"{AGENT_PORTS[name]}={port}" for name, port in agent_ports()[0].items()]
