#!/bin/bash
set -euo pipefail
sed -n '11,20p' server.log > slice.txt
