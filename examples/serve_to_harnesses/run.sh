#!/usr/bin/env bash
# Serve a checkpoint through Gyre's proxy and point real agent CLIs at it.
# Usage: bash examples/serve_to_harnesses/run.sh [MODEL_PATH]   (default: the built-in small model)
# PORT (environment; default 8765, 0: a free one). MODEL_PATH may be any HF folder: a training run's checkpoint (runs/<run>/checkpoints/latest), a gyre.sft one.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:-small}
PORT=${PORT:-8765}
LOG=$(mktemp -d)/serve.log

# 1. The proxy over one rollout engine, three execution keys (one per CLI), for 10 minutes at most.
python -m gyre.serve model.path="$MODEL" proxy.port=$PORT serve.executions=3 serve.duration_s=600 \
  run_dir="$(dirname "$LOG")" proxy.max_tokens_cap=256 >"$LOG" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 120); do grep -q "key for execution serve-2" "$LOG" && break; sleep 1; done
cat "$LOG"
PORT=$(sed -n 's|.*Anthropic base URL: http://127.0.0.1:\([0-9]*\).*|\1|p' "$LOG")  # the real one when PORT=0
key() { grep "key for execution $1:" "$LOG" | awk '{print $NF}'; }
WORK=$(mktemp -d)

# 2. mini-swe-agent (PyPI), through litellm's OpenAI provider.
if python -c "import minisweagent" 2>/dev/null; then
  echo "--- mini-swe-agent"
  cat >"$WORK/mini-gyre.yaml" <<YAML
run: {task: "Create hello.txt containing hi"}
agent: {step_limit: 2, cost_limit: 0, mode: yolo, confirm_exit: false}
model: {model_name: gyre, cost_tracking: ignore_errors,
        model_kwargs: {api_base: "http://127.0.0.1:$PORT/v1", custom_llm_provider: openai, max_tokens: 128, drop_params: true}}
environment: {environment_class: local, cwd: "$WORK", timeout: 30}
YAML
  (cd "$WORK" && LITELLM_LOCAL_MODEL_COST_MAP=True MSWEA_COST_TRACKING=ignore_errors MSWEA_CONFIGURED=true \
    MSWEA_GLOBAL_CONFIG_DIR="$WORK/mswea" OPENAI_API_KEY=$(key serve) timeout 300 \
    python -m minisweagent.run.mini -y --exit-immediately -c mini.yaml -c "$WORK/mini-gyre.yaml" | tail -3) || true
else echo "mini-swe-agent not installed: pip install mini-swe-agent"; fi

# 3. Claude Code (npm @anthropic-ai/claude-code), against the Anthropic API (no /v1 in the base URL).
if command -v claude >/dev/null; then
  echo "--- Claude Code"
  (cd "$WORK" && IS_SANDBOX=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT \
    ANTHROPIC_API_KEY=$(key serve-1) timeout 300 claude -p "Create hello.txt containing hi" --max-turns 2 \
    --dangerously-skip-permissions --output-format stream-json --verbose | tail -3) || true
else echo "Claude Code not installed: npm install -g @anthropic-ai/claude-code@2.1.197"; fi

# 4. Codex CLI (npm @openai/codex), against the Responses API, with a provider entry in its config.
if command -v codex >/dev/null; then
  echo "--- Codex CLI"
  export CODEX_HOME=$WORK/codex && mkdir -p "$CODEX_HOME"
  printf 'model = "gyre"\nmodel_provider = "gyre"\n[model_providers.gyre]\nname = "gyre"\nbase_url = "http://127.0.0.1:%s/v1"\nenv_key = "GYRE_API_KEY"\nwire_api = "responses"\n' $PORT >"$CODEX_HOME/config.toml"
  (cd "$WORK" && GYRE_API_KEY=$(key serve-2) timeout 300 codex exec --skip-git-repo-check "Create hello.txt containing hi" | tail -3) || true
else echo "Codex CLI not installed: npm install -g @openai/codex@0.171.0"; fi

echo "--- recorded calls (token-exact, per execution): $(dirname "$LOG")/records"
ls -l "$(dirname "$LOG")/records"
