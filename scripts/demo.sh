#!/usr/bin/env bash
# Installs what is missing, builds keel, and runs the embedded demo.
# Arguments are passed to the demo (try --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh" --target keel-demo
exec "$root/build/demos/keel-demo" "$@"
