#!/bin/bash
set -euo pipefail
tac lines.txt > reversed.txt
