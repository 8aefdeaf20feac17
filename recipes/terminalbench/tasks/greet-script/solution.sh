#!/bin/bash
set -euo pipefail
cat > greet.sh <<'EOF'
#!/bin/sh
echo "Hello, ${1:-world}!"
EOF
chmod +x greet.sh
