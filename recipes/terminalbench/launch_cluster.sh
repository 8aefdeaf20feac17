#!/usr/bin/env bash
# Terminal-Bench-style run on a GPU cluster (Terminal-Bench 1.x or Harbor task folders; a task passes only if every parsed test passes).
# Shorter executions than SWE; many more tool calls per token.
# Start Ray on every node first (`ray start --head` here, `ray start --address=HEAD:6379` on the others);
# the driver attaches to it. MODEL and DATA are local paths: nothing is downloaded.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a local Hugging Face checkpoint folder}
DATA=${DATA:?set DATA to a folder of Terminal-Bench task folders}

CELLS=${CELLS:-8}            # cells of GPUS_PER_CELL devices each; cell 0 is the core
GPUS_PER_CELL=${GPUS_PER_CELL:-8}
python -m gyre.main +recipe=terminalbench \
  model.path="$MODEL" model.dtype=bfloat16 \
  rollout=vllm rollout.device=cuda \
  cluster.cells="$CELLS" cluster.gpus_per_cell="$GPUS_PER_CELL" cluster.backend=nccl cluster.capacity=32 \
  env.path="$DATA" \
  harness.max_turns=100 harness.max_tokens=32768 harness.execution.time_limit_s=1800 \
  scheduler.batch_size=64 trainer.group_size=8 trainer.total_steps=50 trainer.lr=1e-6 \
  trainer.max_tokens_per_microbatch=131072 trainer.attention_backend=flex \
  "$@"
