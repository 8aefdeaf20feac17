#!/bin/bash
set -euo pipefail
tr 'a-z' 'A-Z' < poem.txt > POEM.txt
