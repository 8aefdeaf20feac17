#!/usr/bin/env bash
# NL2Repo-style run on a GPU cluster (spec-to-repository tasks, partial credit = passed tests / test_case_count).
# Long executions (hours, ~1M tokens): raise the time limit and the micro-batch size accordingly.
# Shared cluster settings (MODEL, CELLS, GPUS_PER_CELL, vLLM, NCCL, flex): recipes/launch_cluster.sh.
set -euo pipefail
DATA=${DATA:?set DATA to a folder of NL2RepoBench task folders}
exec bash "$(dirname "$0")/../launch_cluster.sh" nl2repo \
  env.path="$DATA" \
  harness.execution.time_limit_s=14400 trainer.total_steps=48 \
  "$@"
