#!/bin/bash
set -euo pipefail
ls backups/backup-*.tar | sort | head -n -3 | xargs rm -f
