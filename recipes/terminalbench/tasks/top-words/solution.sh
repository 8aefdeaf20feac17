#!/bin/bash
set -euo pipefail
tr -cs 'A-Za-z' '\n' < text.txt | tr 'A-Z' 'a-z' | grep -v '^$' | sort | uniq -c | sort -k1,1nr -k2,2 | head -3 | awk '{print $2, $1}' > top3.txt
