#!/usr/bin/env bash
# Runs the CPU test suite (GPU tests are marked `gpu` and skip themselves without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 -m pytest -q "$@"
