#!/usr/bin/env bash
# The GPU checks, in one run, for a machine with CUDA (CI has none; the `gpu` tests skip there).
#   bash .ci/gpu_checks.sh            # writes logs and JSON under $OUT (default /tmp/gyre_gpu_checks)
# It uses the machine's own python3 with CUDA PyTorch and transformers; nothing is installed. Not covered
# (their packages are not there to run): vLLM on CUDA and a whole cluster job (Ray, Hydra).
set -uo pipefail
OUT=${OUT:-/tmp/gyre_gpu_checks}
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
status=0
nvidia-smi -L
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, torch.cuda.get_device_name())"

# The gpu-marked tests (in files whose imports need no Ray, Hydra or vLLM); -s shows their printed figures.
python3 -m pytest -q -s -p no:cacheprovider -o addopts="" --strict-markers -ra --durations=10 -m gpu --timeout 400 \
  tests/ops/test_tree_attention.py tests/algo/test_chunked_exactness.py tests/replica/test_mixed_precision.py \
  tests/rollout/test_engine_parking.py tests/rollout/test_hf_engine.py 2>&1 | tee "$OUT/pytest.log" || status=1

# Tree-packed vs per-path training on the GPU (flex_attention), float32 and bfloat16.
for dtype in float32 bfloat16; do
  python3 benchmarks/tree_training.py --device cuda --dtype "$dtype" --executions 4 --turns 32 --hidden 2048 \
    --layers 4 --max-tokens 32768 --repeats 3 --out "$OUT/tree_training_cuda_$dtype.json" 2>&1 \
    | tee "$OUT/tree_training_$dtype.log" || status=1
done
exit $status
