#!/bin/bash
set -euo pipefail
awk -F, 'NR == 1 || $2 >= 30' people.csv > adults.csv
