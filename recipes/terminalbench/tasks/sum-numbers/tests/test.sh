#!/bin/bash
# Harbor verifier: run the tests from the working directory, then write the reward Harbor reads.
# TEST_DIR / VERIFIER_LOGS_DIR name /tests and /logs/verifier where a runner cannot mount them there.
TESTS="${TEST_DIR:-/tests}"
LOGS="${VERIFIER_LOGS_DIR:-/logs/verifier}"
mkdir -p "$LOGS"
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
if python3 -m pytest -p no:cacheprovider -rA "$TESTS/test_outputs.py"; then
  echo 1 > "$LOGS/reward.txt"
else
  echo 0 > "$LOGS/reward.txt"
fi
