#!/bin/bash
set -euo pipefail
printf 'Hello, world!\n' > hello.txt
