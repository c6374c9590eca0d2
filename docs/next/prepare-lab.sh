#!/bin/bash
# On the laptop, before the device call of docs/next/call-packed-mma.sh (~4 min on 2 cores): main's kernels
# (lab/sk64c), and three trees with their kernels: lab/packed (packed-stage.patch: host code and kernels),
# lab/both (packed-stage.patch + chunk-tensor-cores.patch), lab/mma (chunk-tensor-cores.patch, kernels only).
#   bash docs/next/prepare-lab.sh       # from the repository root; lab/ is in .git/info/exclude
set -e
root=$PWD
tree() {  # tree NAME PATCH...: a copy of src, hip, tests and pyproject.toml with the patches applied
  local d=$root/lab/$1; shift
  rm -rf $d && mkdir -p $d && cp -r src hip tests pyproject.toml $d/
  for p in "$@"; do (cd $d && patch -p1 -s < $root/$p); done
}
kernels() {  # kernels NAME: its hip/ built for sm_90a into lab/NAME/lib, with its own tree's build code
  local d=$root/lab/$1 src=$root/src
  [ -d $root/lab/$1/src ] && src=$root/lab/$1/src
  PYTHONPATH=$src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir $d/hip --out $d/lib --jobs 2 \
    > $d/build.log 2>&1 || { tail -20 $d/build.log; exit 1; }
  grep -h "fd_megakernel" -A2 $d/build.log | grep -i "spill\|registers" | head -2 || true
}
mkdir -p lab/sk64c && rm -rf lab/sk64c/hip && cp -r hip lab/sk64c/hip
tree packed docs/dropped/packed-stage.patch
tree both docs/dropped/packed-stage.patch docs/dropped/chunk-tensor-cores.patch
mkdir -p lab/mma && rm -rf lab/mma/hip && cp -r hip lab/mma/hip && (cd lab/mma && patch -p1 -s < $root/docs/dropped/chunk-tensor-cores.patch)
for name in sk64c packed both mma; do kernels $name; echo "built lab/$name"; done
ls -la lab/*/lib/libfleet_kernels.so
