#!/bin/bash
set -euo pipefail
chmod +x run.sh
./run.sh > output.txt
