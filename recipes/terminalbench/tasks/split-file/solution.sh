#!/bin/bash
set -euo pipefail
mkdir -p parts
split -l 10 big.txt parts/chunk_
