#!/bin/bash
set -euo pipefail
sed -i 's/\t/    /g' code.txt
