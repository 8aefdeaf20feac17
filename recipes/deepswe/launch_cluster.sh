#!/usr/bin/env bash
# DeepSWE-style run on a GPU cluster (what the DeepSWE report trained: Qwen3-32B on R2E-Gym-Subset,
# 8 tasks x 8 rollouts per step, 32K-token responses, 5400 s per execution, binary reward).
# Start Ray on every node first (`ray start --head` here, `ray start --address=HEAD:6379` on the others);
# the driver attaches to it. MODEL and DATA are local paths: nothing is downloaded.
set -euo pipefail
MODEL=${MODEL:?set MODEL to a local Hugging Face checkpoint folder}
DATA=${DATA:?set DATA to an R2E-Gym / SWE-bench style .jsonl or .parquet}
REPOS=${REPOS:?set REPOS to the folder of per-instance repository tarballs or git mirrors}
CELLS=${CELLS:-8}            # cells of GPUS_PER_CELL devices each; cell 0 is the core
GPUS_PER_CELL=${GPUS_PER_CELL:-8}
python -m gyre.main +recipe=deepswe \
  model.path="$MODEL" model.dtype=bfloat16 \
  rollout=vllm rollout.device=cuda \
  cluster.cells="$CELLS" cluster.gpus_per_cell="$GPUS_PER_CELL" cluster.backend=nccl cluster.capacity=32 \
  env.path="$DATA" env.loader.repos="$REPOS" \
  harness.max_turns=100 harness.max_tokens=32768 harness.execution.time_limit_s=5400 \
  scheduler.batch_size=64 trainer.group_size=8 trainer.total_steps=50 trainer.lr=1e-6 \
  trainer.max_tokens_per_microbatch=131072 trainer.attention_backend=flex \
  "$@"
