#!/bin/bash
set -euo pipefail
awk '{print $1}' access.log | LC_ALL=C sort | uniq -c | LC_ALL=C sort -k1,1nr -k2,2 | awk '{print $2, $1}' > ip_counts.txt
