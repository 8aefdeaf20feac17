#!/bin/bash
set -euo pipefail
awk '!seen[$0]++' items.txt > unique.txt
