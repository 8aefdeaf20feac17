#!/usr/bin/env bash
# A Hydra sweep over the path cap and the staleness bound, then one plot comparing the runs.
# Usage: bash examples/sweep/run.sh [STEPS] [SWEEP_DIR]   (4 runs of STEPS steps each; default 3: a few minutes
# on 2 cores; SWEEP_DIR default runs/sweep_<time>)
set -euo pipefail
cd "$(dirname "$0")/../.."
STEPS=${1:-3}
SWEEP=${2:-runs/sweep_$(date +%Y-%m-%d_%H-%M-%S)}
# -m comes before the overrides; each point's run folder is $SWEEP/<its overrides>/ (with .hydra/).
python -m gyre.main -m +recipe=nl2repo trajectory.max_paths=1,5 scheduler.max_staleness=0,1 \
  trainer.total_steps=$STEPS cluster.cells=2 scheduler.batch_size=4 trainer.group_size=2 \
  harness.max_turns=2 harness.reference.sub_agent=false harness.progress=false tracking.backends=[jsonl] hydra.sweep.dir="$SWEEP"
python -m gyre.compare "$SWEEP"   # writes $SWEEP/compare.png and prints each run's last values
