#!/bin/bash
set -euo pipefail
tar -czf docs.tar.gz docs
