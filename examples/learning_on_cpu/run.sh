#!/usr/bin/env bash
# The learning run on a CPU laptop, step by step: demonstrations -> SFT -> RL -> evaluation before and after.
# Usage: bash examples/learning_on_cpu/run.sh [OUT_DIR]   (about 25 minutes on 2 cores)
# Knobs (environment): SFT_STEPS (1200), TRAIN and DEV (the learn suite's task folders; the test split is the
# learning benchmark's alone), DRILLS (the copying drills demonstrated beside TRAIN), RL_ARGS (extra overrides
# of the RL run, e.g. RL_ARGS="trainer.total_steps=8"), EVAL_ARGS (extra overrides of both evaluations, e.g.
# EVAL_ARGS="eval.samples=4").
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-runs/example_learning}
SFT_STEPS=${SFT_STEPS:-1200}
TRAIN=${TRAIN:-recipes/learn/tasks/train}
DEV=${DEV:-recipes/learn/tasks/dev}
DRILLS=${DRILLS:-recipes/learn/tasks/drills}
RL_ARGS=${RL_ARGS:-}
EVAL_ARGS=${EVAL_ARGS:-}
# The recipe's harness (conf/recipe/learn.yaml): the agent hands pages to sub-agents and summarises past 1600 chars.
HARNESS="harness.max_turns=4 harness.max_tokens=256 harness.execution.time_limit_s=120 harness.reference.explore=false \
harness.reference.sub_max_turns=2 harness.reference.context_chars=1600 harness.reference.max_retries=1 \
harness.reference.tools=[read_file,write_file,delegate,finish] harness.reference.sub_tools=[read_file,report]"

# 1. Supervised warm start: record 2 demonstrations per training task of the learn suite through the proxy
#    (the suite's imperfect demonstrator) and 2 of every copying drill, then train the built-in small model on
#    them, the names in every demonstration renamed afresh at every step (rename.json: so that it learns to
#    copy names, not fit them).
python -m gyre.sft model.path=small env=learn env.path=$TRAIN data.demonstrations=2 "data.also_demonstrate=[$DRILLS]" $HARNESS \
  sft.steps=$SFT_STEPS sft.short_context_steps=$((SFT_STEPS * 3 / 4)) sft.save_every=$SFT_STEPS run_dir=$OUT/sft \
  sft.rename_file=recipes/learn/tasks/rename.json

# 2. Dev pass rate of the SFT checkpoint (every dev task twice).
EVAL="env=learn env.path=$DEV eval.samples=2 eval.torch_threads=1 harness.progress=false $HARNESS $EVAL_ARGS"
python -m gyre.eval $EVAL model.path=$OUT/sft/checkpoints/latest run_dir=$OUT/eval_before

# 3. RL from the SFT checkpoint: the learn recipe (elastic scheduler, 4 cells), without its own warm start.
python -m gyre.main +recipe=learn '~warm_start' model.path=$OUT/sft/checkpoints/latest run_dir=$OUT/rl \
  env.path=$TRAIN env.val_path=$DEV $RL_ARGS

# 4. The same evaluation of the RL checkpoint.
python -m gyre.eval $EVAL model.path=$OUT/rl/checkpoints/latest run_dir=$OUT/eval_after

python - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("eval_before", "eval_after"):
    summary = json.load(open(f"{out}/{name}/eval.json"))["summary"]
    print(name, json.dumps(summary.get("all", summary)))
PY
echo "curves: $OUT/sft/sft_loss.png $OUT/rl/val_curve.png $OUT/rl/timeline.png"
