#!/bin/bash
set -euo pipefail
(cd site && find . -type f | sed 's|^\./||' | LC_ALL=C sort) > inventory.txt
