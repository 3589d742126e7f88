#!/usr/bin/env bash
# Configures and builds one CMake preset (default: release); what follows the preset goes to
# `cmake --build` (scripts/test.sh builds only the sanitizer subset with --target):
#   scripts/build.sh [preset [cmake --build options...]]
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${1:-release}"
shift $(($# > 0 ? 1 : 0))
scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" "$@"
