#!/usr/bin/env bash
# The GPU-cluster settings every recipe shares; each recipe's launch_cluster.sh calls this with its own.
#   bash recipes/launch_cluster.sh RECIPE [hydra overrides...]
# Start Ray on every node first (`ray start --head` here, `ray start --address=HEAD:6379` on the others);
# the driver attaches to it. MODEL (and the recipe's data paths) are local paths: nothing is downloaded.
set -euo pipefail
RECIPE=${1:?usage: launch_cluster.sh RECIPE [overrides...]}
shift
MODEL=${MODEL:?set MODEL to a local Hugging Face checkpoint folder}
CELLS=${CELLS:-8}            # cells of GPUS_PER_CELL devices each; cell 0 is the core
GPUS_PER_CELL=${GPUS_PER_CELL:-8}
RANKS_PER_CELL=${RANKS_PER_CELL:-1}  # > 1: each cell's training replica is FSDP2-sharded over that many processes
# model.dtype=bfloat16: bf16 compute on float32 master weights and optimizer state (lr 1e-6 updates would
# round away on bf16 weights); weights leave the trainer in bf16. Layer-by-layer FSDP2 rounds hold one
# layer's whole weights at a time. vLLM sizes its KV cache from gpu_memory_utilization.
exec python -m gyre.main +recipe="$RECIPE" \
  model.path="$MODEL" model.dtype=bfloat16 \
  rollout=vllm rollout.device=cuda rollout.max_cached_tokens=null \
  cluster.cells="$CELLS" cluster.gpus_per_cell="$GPUS_PER_CELL" cluster.ranks_per_cell="$RANKS_PER_CELL" \
  cluster.backend=nccl cluster.capacity=32 cluster.fsdp_reshard_after_forward=true cluster.weight_sync_bucket_mb=1024 \
  harness.max_turns=100 harness.max_tokens=32768 \
  scheduler.batch_size=64 trainer.group_size=8 trainer.lr=1e-6 \
  trainer.max_tokens_per_microbatch=131072 trainer.attention_backend=flex \
  "$@"
