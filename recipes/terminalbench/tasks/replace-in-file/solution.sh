#!/bin/bash
set -euo pipefail
sed -i 's/staging/production/g' config.ini
