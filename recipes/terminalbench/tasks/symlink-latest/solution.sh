#!/bin/bash
set -euo pipefail
ln -s releases/v2 latest
