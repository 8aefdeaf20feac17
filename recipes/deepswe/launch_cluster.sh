#!/usr/bin/env bash
# DeepSWE-style run on a GPU cluster (what the DeepSWE report trained: Qwen3-32B on R2E-Gym-Subset,
# 8 tasks x 8 rollouts per step, 32K-token responses, 5400 s per execution, binary reward).
# Shared cluster settings (MODEL, CELLS, GPUS_PER_CELL, vLLM, NCCL, flex): recipes/launch_cluster.sh.
set -euo pipefail
DATA=${DATA:?set DATA to an R2E-Gym / SWE-bench style .jsonl or .parquet}
REPOS=${REPOS:?set REPOS to the folder of per-instance repository tarballs or git mirrors}
exec bash "$(dirname "$0")/../launch_cluster.sh" deepswe \
  env.path="$DATA" env.loader.repos="$REPOS" \
  harness.execution.time_limit_s=5400 trainer.total_steps=50 \
  "$@"
