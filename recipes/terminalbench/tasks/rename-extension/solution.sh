#!/bin/bash
set -euo pipefail
for f in images/*.jpeg; do mv "$f" "${f%.jpeg}.jpg"; done
