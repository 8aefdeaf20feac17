#!/bin/bash
set -euo pipefail
mkdir -p project/src project/tests
printf 'print("hi")\n' > project/src/main.py
printf '# project\n' > project/README.md
