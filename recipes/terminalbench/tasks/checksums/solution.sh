#!/bin/bash
set -euo pipefail
sha256sum files/* > SHA256SUMS
