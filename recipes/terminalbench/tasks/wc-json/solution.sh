#!/bin/bash
set -euo pipefail
printf '{"lines": %d, "words": %d, "chars": %d}\n' $(wc -l < essay.txt) $(wc -w < essay.txt) $(wc -c < essay.txt) > stats.json
