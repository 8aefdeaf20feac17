#!/bin/bash
set -euo pipefail
sed -i 's/\r$//' dos.txt
