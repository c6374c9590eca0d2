#!/bin/bash
# One device call (fifth session): the top-k in one warp (this tree) against the block top-k before it
# (docs/next/warp-topk.patch reversed), each with the plan variants named below, in one process;
# then the GPU tests and a trace of the default.
#   bash docs/next/run.sh        # on the H200, from the repository root (needs lab/ ignored: .git/info/exclude)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s)
build() { local d=$PWD/lab/$1; shift; rm -rf $d && mkdir -p $d && cp -r hip $d/
  (cd $d && for p in "$@"; do patch -p1 -s $p || exit 1; done) || return 1
  python3 -m fleet_decode.kernels.build --arch sm_90a --hip-dir $d/hip --out $d/lib --jobs 7 > $d/build.log 2>&1 || tail -20 $d/build.log; }
build main & build blocktopk "-R -i $PWD/docs/next/warp-topk.patch" & wait
echo "builds $(( $(date +%s) - t0 )) s"; grep -H "fd_megakernel \|route_topk" lab/*/build.log
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
mkdir -p /tmp/t build/kernels/sm_90a && cp lab/main/lib/* build/kernels/sm_90a/
export FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py tests/test_megakernel_gpu.py 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
timeout 240 python3 -m fleet_decode.kernels.lab --sweep --variants "${VARIANTS:-default,attn_chunk=32 x4 1056 rows,attn_chunk=32 x4,attn_chunk=48,down_split=2,down_split=3}" \
  $(L blocktopk) --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace --out /tmp/t/trace.json 2>&1 | grep -v Warning | tail -40
[ -n "$OUT" ] && tar czf $OUT/next.tgz -C /tmp/t .
echo "all done $(( $(date +%s) - t0 )) s"
