#!/usr/bin/env bash
# The peers' loop detectors, each in its own environment under benchmarks/peers/.env (not loopwatch's):
# OpenHands' StuckDetector needs Python 3.12+ (openhands-sdk), Gemini CLI's LoopDetectionService Node 20+.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
env="$here/.env"
mkdir -p "$env/node"
python=""
for candidate in python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python; do
    if "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' >/dev/null 2>&1; then
        python="$candidate"; break
    fi
done
[ -n "$python" ] || { echo "openhands-sdk needs Python 3.12 or newer" >&2; exit 1; }
[ -x "$env/venv/bin/python" ] || "$python" -m venv "$env/venv"
"$env/venv/bin/pip" install --quiet "openhands-sdk==1.58.2"
cp "$here/gemini_loop.mjs" "$env/node/"
cd "$env/node"
[ -f package.json ] || npm init -y >/dev/null
npm install --quiet --no-audit --no-fund "@google/gemini-cli-core@0.61.0"
echo "peers installed in $env"
