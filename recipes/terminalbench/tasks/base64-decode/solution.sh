#!/bin/bash
set -euo pipefail
base64 -d secret.b64 > secret.txt
