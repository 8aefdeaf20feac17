#!/bin/bash
set -euo pipefail
grep ERROR app.log > errors.txt
grep -c ERROR app.log > error_count.txt
