#!/bin/bash
set -euo pipefail
python3 - <<'EOF'
values = dict(line.split(' ', 1) for line in open('values.txt').read().splitlines())
keys = [line.split('=')[0] for line in open('template.env').read().splitlines() if line]
open('.env', 'w').write(''.join(f'{k}={values.get(k, "")}\n' for k in keys))
EOF
