#!/bin/bash
set -euo pipefail
tail -n +2 people.csv | cut -d, -f3 > cities.txt
