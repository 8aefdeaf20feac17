#!/bin/bash
set -euo pipefail
python3 -m zipfile -c bundle.zip report.txt data.csv
