#!/bin/bash
set -euo pipefail
find mixed -type f | sed 's/.*\.//' | LC_ALL=C sort | uniq -c | awk '{print $2, $1}' > report.txt
