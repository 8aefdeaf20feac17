#!/bin/bash
set -euo pipefail
chmod 600 secret.txt
chmod 755 public
chmod 644 public/index.html
