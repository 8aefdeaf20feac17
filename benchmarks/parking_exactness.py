"""Parking changes no output: the real main job twice at temperature 0, sessions parked (proxy.parking on) and
not (off), every call's tokens and behaviour log-probs compared.

    python benchmarks/parking_exactness.py --out parking_exactness.json

Each run is ``python -m gyre.main`` (Ray cells, proxy, the reference harness over HTTP, the hf engine) with
the same seed, tasks and settings; a simulated tool time before every agent turn makes the sessions' gaps
long enough for the router to park them, so their next calls restore KV from host memory. Calls are
matched by execution and by their order within it. Targets: every call in both runs, the same tokens,
log-probs within 1e-6, and parks and restores in the parked run (none in the other).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console

from gyre.proxy.record_format import read_record_file


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file for the results")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--cells", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=2)
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--tool-delay-mu", type=float, default=-2.0, help="log-normal mu of the simulated tool time, s")
    parser.add_argument("--keep", help="folder to keep both runs in (default: a temporary one)")
    return parser.parse_args()


def run(parking: bool, args: argparse.Namespace, root: Path) -> Path:
    run_dir = root / ("parking_on" if parking else "parking_off")
    overrides = [
        "+recipe=deepswe", "scheduler=colocate", f"run_dir={run_dir}", f"trainer.total_steps={args.steps}",
        f"cluster.cells={args.cells}", f"scheduler.batch_size={args.batch_size}", f"trainer.group_size={args.group_size}",
        f"harness.max_turns={args.max_turns}", "harness.temperature=0.0", "harness.reference.sub_agent=false",
        f"harness.reference.tool_delay_mu={args.tool_delay_mu}", "harness.reference.tool_delay_sigma=0.5",
        f"proxy.parking.enabled={str(parking).lower()}",
        "harness.progress=false", "tracking.backends=[jsonl]", "trainer.save_every=0",
    ]
    done = subprocess.run([sys.executable, "-m", "gyre.main", *overrides], capture_output=True, text=True, check=False,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    if done.returncode != 0:
        raise RuntimeError(f"the run with parking {'on' if parking else 'off'} failed:\n{done.stderr[-4000:]}")
    return run_dir


def calls(run_dir: Path) -> dict[tuple[str, int], tuple[list[int], list[float]]]:
    """(execution, call index) -> (response tokens, behaviour log-probs) of every recorded call."""
    found = {}
    for path in sorted((run_dir / "records").glob("*.jsonl")):
        errors: list[str] = []
        records = read_record_file(path, errors=errors)
        if errors:
            raise ValueError(f"{path}: {errors}")
        for index, record in enumerate(records):  # completion order: one session per execution (no sub-agent)
            # an execution id ends in a random part; the rest (task, step, sample) is the same in both runs
            found[(record.execution_id.rsplit("-", 1)[0], index)] = (record.response_ids, record.response_logprobs)
    return found


def parking_counts(run_dir: Path) -> dict[str, float]:
    steps = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in steps if "reward/mean" in row]
    return {key: float(sum(row.get(f"parking/{key}", 0.0) for row in steps))
            for key in ("parks", "restores", "transfer_bytes", "parked_slot_s")}


def compare(on: Path, off: Path) -> dict[str, float]:
    parked, plain = calls(on), calls(off)
    shared = sorted(set(parked) & set(plain))
    differing = [key for key in shared if parked[key][0] != plain[key][0]]
    same_tokens = [key for key in shared if parked[key][0] == plain[key][0]]
    logprob_diff = max((abs(a - b) for key in same_tokens for a, b in zip(parked[key][1], plain[key][1])), default=0.0)
    on_counts, off_counts = parking_counts(on), parking_counts(off)
    return {
        "calls_parking_on": len(parked), "calls_parking_off": len(plain),
        "calls_only_in_one_run": len(set(parked) ^ set(plain)), "calls_compared": len(shared),
        "calls_with_different_tokens": len(differing), "max_logprob_abs_diff": logprob_diff,
        **{f"{key}_parking_on": value for key, value in on_counts.items()},
        **{f"{key}_parking_off": value for key, value in off_counts.items()},
    }


def main() -> dict[str, float]:
    args = parse_args()
    console = Console()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gyre-parking-"))
    runs = {}
    for parking in (True, False):
        console.print(f"[bold]main job, temperature 0, parking {'on' if parking else 'off'}[/bold]")
        runs[parking] = run(parking, args, root)
    result = compare(runs[True], runs[False])
    result["exact"] = float(result["calls_only_in_one_run"] == 0 and result["calls_with_different_tokens"] == 0
                            and result["max_logprob_abs_diff"] <= 1e-6)
    for key, value in result.items():
        console.print(f"{key:32s} {value:.6g}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
