#!/bin/bash
set -euo pipefail
find . -type f -name '*.tmp' -delete
