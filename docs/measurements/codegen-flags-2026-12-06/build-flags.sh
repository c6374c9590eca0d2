#!/bin/bash
# Builds this tree's hip/ with extra nvcc flags into lab/NAME/lib, without touching kernels.build: nvcc is
# reached through nvcc-wrap, which appends $NVCC_EXTRA to every call (build.json then names the wrapper as
# its compiler). Run from the repository root:
#   bash docs/measurements/codegen-flags-2026-12-06/build-flags.sh o2 "-Xptxas -O2"
set -eo pipefail  # a failed build fails the script, not only its last line's tail
here=$(cd "$(dirname "$0")" && pwd)
export NVCC=$here/nvcc-wrap NVCC_EXTRA="$2"
PYTHONPATH=src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir hip --out lab/$1/lib --jobs 2 2>&1 | tail -1
