#!/usr/bin/env bash
# Builds the release binaries and test binaries into dist/, a folder that runs on a GPU host with
# only the NVIDIA driver (yaml-cpp, protobuf, cudart, spdlog and fmt all linked statically),
# with deploy/ (systemd units, tmpfiles entry, example config) and the man pages beside them.
# On the GPU host: GPUSORT_BIN=dist scripts/gpu-check.sh OUTDIR
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh release
out=dist
rm -rf "$out"
mkdir -p "$out/bin" "$out/bench" "$out/tests"
cp build/release/client/gpusort build/release/service/gpusortd "$out/bin/"
# The Open MPI programs (mpi_bench, mpi_sort_tests) need Open MPI's libraries and mpirun, which
# a bare GPU host lacks: they stay out of the bundle rather than failing the check below.
uses_mpi() { ldd "$1" | grep -q 'libmpi'; }
for b in build/release/bench/*_bench; do uses_mpi "$b" || cp "$b" "$out/bench/"; done
for t in build/release/tests/*/*_tests; do
  uses_mpi "$t" && continue
  mkdir -p "$out/tests/$(basename "$(dirname "$t")")"
  cp "$t" "$out/tests/$(basename "$(dirname "$t")")/"
done
# What a GPU host needs besides the programs (README, "Installing on a GPU host"): the units,
# the tmpfiles entry, the example config and the man pages, as in the repository.
cp -r deploy "$out/deploy"
rm -rf "$out/deploy/debian"   # the .deb's maintainer scripts: nothing to run by hand
mkdir -p "$out/man"
cp docs/man/* "$out/man/"
git rev-parse --short HEAD > "$out/COMMIT" 2>/dev/null || echo unknown > "$out/COMMIT"
# Anything beyond the C/C++ runtime and OpenMP would not be on the GPU host.
unexpected=$(for f in "$out"/bin/* "$out"/bench/* "$out"/tests/*/*; do ldd "$f"; done |
  awk '{print $1}' | sort -u |
  grep -v -E '^(linux-vdso|/lib64/ld-linux|libc\.so|libm\.so|libstdc\+\+|libgcc_s|libgomp|libpthread|libdl|librt|libutil)' || true)
if [ -n "$unexpected" ]; then
  echo "bundle: unexpected shared libraries: $unexpected" >&2
  exit 1
fi
du -sh "$out"
