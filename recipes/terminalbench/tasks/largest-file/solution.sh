#!/bin/bash
set -euo pipefail
ls -S data | head -n 1 > largest.txt
