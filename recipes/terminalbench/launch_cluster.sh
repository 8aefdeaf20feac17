#!/usr/bin/env bash
# Terminal-Bench-style run on a GPU cluster (Terminal-Bench 1.x or Harbor task folders; a task passes only if every parsed test passes).
# Shorter executions than SWE; many more tool calls per token.
# Shared cluster settings (MODEL, CELLS, GPUS_PER_CELL, vLLM, NCCL, flex): recipes/launch_cluster.sh.
set -euo pipefail
DATA=${DATA:?set DATA to a folder of Terminal-Bench task folders}
exec bash "$(dirname "$0")/../launch_cluster.sh" terminalbench \
  env.path="$DATA" \
  harness.execution.time_limit_s=1800 trainer.total_steps=50 \
  "$@"
