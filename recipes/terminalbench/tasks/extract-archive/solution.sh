#!/bin/bash
set -euo pipefail
mkdir -p out
tar -xzf bundle.tar.gz -C out
python3 -c "import json; print(json.load(open('out/release/config.json'))['version'])" > version.txt
