#!/usr/bin/env bash
# The whole test suite: installs what it needs, builds the test preset, runs ctest. Every engine
# test runs twice, with the default configuration and with a tiny device budget that forces the
# out-of-core path. GPU tests skip where there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release
ctest --preset release
