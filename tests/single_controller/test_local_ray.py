"""The local Ray instance of a job run without a cluster (gyre.single_controller.local_ray): its agents on ports
Gyre chose (else a loaded machine can abort its start, ray-project/ray#65983), the job's runtime environment in
its workers, and none of the node's processes left once the job exits or is killed. Each case runs in a process
of its own, as a job's driver does (the test workers keep their Ray connection)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

DRIVER = r"""
import json, os, sys, time
import ray
from gyre.single_controller.local_ray import LocalRay

local = LocalRay(runtime_env={"env_vars": {"GYRE_LOCAL_RAY_PROBE": "seen"}})

@ray.remote
def probe():
    return os.environ.get("GYRE_LOCAL_RAY_PROBE")

pids = [info.process.pid for infos in local.node.all_processes.values() for info in infos]
print(json.dumps({"chosen": local.agent_ports, "nodes": [n["MetricsExportPort"] for n in ray.nodes() if n["Alive"]],
                  "env": ray.get(probe.remote()), "pids": pids}), flush=True)
if sys.argv[1] == "wait":
    time.sleep(300)
"""  # "exit": leaves at the end of the script, Ray up


def start(ending: str) -> tuple[subprocess.Popen, dict]:
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, ending], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": ""})
    line = driver.stdout.readline()
    assert line, f"the driver printed nothing (exit {driver.wait(60)})"
    return driver, json.loads(line)


def alive(pids: list[int]) -> list[int]:
    def running(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    return [pid for pid in pids if running(pid)]


def gone_within(pids: list[int], seconds: float) -> list[int]:
    deadline = time.monotonic() + seconds
    while alive(pids) and time.monotonic() < deadline:
        time.sleep(0.5)
    return alive(pids)


@pytest.mark.slow
def test_the_local_instance_runs_on_chosen_ports_and_ends_with_the_job():
    driver, seen = start("exit")  # LocalRay.shutdown at exit: what a job and a benchmark call
    assert seen["nodes"] == [seen["chosen"]["metrics_export_port"]]  # its one node, on the port Gyre chose
    assert len(set(seen["chosen"].values())) == 4
    assert seen["env"] == "seen" and len(seen["pids"]) >= 3  # the GCS, the raylet, the agents, ...
    assert driver.wait(60) == 0
    assert gone_within(seen["pids"], 30) == []


@pytest.mark.slow
def test_nothing_of_it_outlives_a_killed_job():
    driver, seen = start("wait")
    driver.send_signal(signal.SIGKILL)
    driver.wait(10)
    # the node's processes stop with the driver (the kernel, Ray's reaper), as ray.init's local instance's do (the
    # agents the raylet started exit by themselves a little later, as theirs: benchmarks/reliability.py's kills)
    assert gone_within(seen["pids"], 30) == []
