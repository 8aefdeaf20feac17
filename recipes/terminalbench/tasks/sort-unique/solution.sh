#!/bin/bash
set -euo pipefail
LC_ALL=C sort -u names.txt > sorted.txt
