#!/bin/bash
set -euo pipefail
join ids.txt scores.txt > joined.txt
