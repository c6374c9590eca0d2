#!/bin/bash
# Device experiment 32: the merge's W_UV sent into the stage by the chunk before it (branch next-merge-lookahead) vs main
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s)
build() { local d=/tmp/v/$1; shift; mkdir -p $d && cp -r hip $d/; (cd $d && for spec in "$@"; do patch -p1 -s $spec || exit 1; done) || return 1
  python3 -m fleet_decode.kernels.build --arch sm_90a --hip-dir $d/hip --out $d/lib --jobs 8 > $d/build.log 2>&1 || tail -5 $d/build.log; }
build look & build main "-R -i $PWD/lab/merge-lookahead.patch" & wait
echo "builds $(( $(date +%s) - t0 )) s"; grep -h "fd_megakernel " /tmp/v/*/build.log
mkdir -p /tmp/t
FLEET_DECODE_KERNELS=/tmp/v/main/lib/libfleet_kernels.so timeout 70 python3 -m fleet_decode.kernels.lab --sweep --variants default --library look=/tmp/v/look/lib/libfleet_kernels.so --out /tmp/t/sweep32.json 2>&1 | grep -v Warning
timeout 40 python3 -m fleet_decode.kernels.trace --library look=/tmp/v/look/lib/libfleet_kernels.so --out /tmp/t/trace32.json 2>&1 | grep -E "untraced|ATTN|attn_merge|o_proj|^out"
tar czf $OUT/lab32.tgz -C /tmp/t .
echo "all done $(( $(date +%s) - t0 )) s"
