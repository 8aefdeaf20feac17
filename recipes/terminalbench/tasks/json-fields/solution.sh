#!/bin/bash
set -euo pipefail
python3 - <<'EOF'
import json
user = json.load(open('user.json'))
open('name.txt', 'w').write(user['name'] + '\n')
open('email.txt', 'w').write(user['email'].lower() + '\n')
EOF
