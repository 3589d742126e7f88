#!/usr/bin/env bash
# Installs the Debian packages gpusort builds against; does nothing when they are all present.
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libboost-dev libspdlog-dev libfmt-dev
          libyaml-cpp-dev libgtest-dev libgmock-dev libprotobuf-dev protobuf-compiler liburing-dev
          python3-numpy python3-protobuf python3-pytest nlohmann-json3-dev
          zlib1g-dev                    # crc32 for the records' checksum (core/records.cpp)
          libcli11-dev                  # the command lines' option parser (client/args.cpp)
          python3-matplotlib            # bench/report.py's plots (ctest bench.report)
          libopenmpi-dev openmpi-bin    # mpi/: gpusort::mpi and gpusort-mpi (ctest mpi.*)
          python3-dask python3-distributed python3-pandas  # python/gpusort/dask.py's tests
          dpkg-dev man-db groff-base    # the .deb and its man pages (ctest deploy.package)
          clang libclang-rt-14-dev      # libFuzzer for fuzz/ (ctest fuzz.*)
          libomp-dev)                   # the tsan preset: clang's libomp with Archer
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
