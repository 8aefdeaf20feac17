#!/bin/bash
set -euo pipefail
cat logs/alpha.log logs/beta.log logs/gamma.log > all.log
