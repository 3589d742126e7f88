#!/bin/sh
# Runs a command on a view of this machine without the CUDA toolkit:
#
#   unshare -rm sh without_cuda.sh EMPTY_DIR COMMAND [ARGS...]
#
# Inside the new user and mount namespace that unshare made, EMPTY_DIR (an empty folder) is
# bind-mounted over every CUDA installation in the usual places (/usr/local/cuda and the folder
# it links to, /usr/local/cuda-*, /opt/cuda), and the variables that point CMake at a toolkit are
# unset. The mounts live and die with the namespace: outside it nothing changes, and no root is
# needed where the kernel lets users make namespaces. Fails if nvcc still runs (a wrapper such as
# /usr/local/bin/nvcc may stay in PATH, but what it starts is gone).
set -eu
empty=$1
shift
for d in /usr/local/cuda /usr/local/cuda-* /opt/cuda; do
  if [ -d "$d" ]; then
    mount --bind "$empty" "$d"
  fi
done
unset CUDA_PATH CUDA_HOME CUDA_ROOT CUDAToolkit_ROOT CUDACXX
if nvcc --version >/dev/null 2>&1; then
  echo "without_cuda.sh: nvcc still runs from $(command -v nvcc)" >&2
  exit 1
fi
exec "$@"
