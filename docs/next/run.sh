#!/bin/bash
# One device call: the router's dot products in the o_proj tiles (Plan.router_in_o_proj) against the
# router tiles, in one process; the GPU tests of this tree's kernels; a trace of the option
# (docs/next/README.md).
#   bash docs/next/run.sh        # on the H200, from the repository root (needs lab/ ignored: .git/info/exclude)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s)
build() { local d=$PWD/lab/$1; shift; rm -rf $d && mkdir -p $d && cp -r hip $d/
  (cd $d && for p in "$@"; do patch -p1 -s $p || exit 1; done) || return 1
  python3 -m fleet_decode.kernels.build --arch sm_90a --hip-dir $d/hip --out $d/lib --jobs 7 > $d/build.log 2>&1 || tail -20 $d/build.log; }
build main & wait  # a variant of the kernels: build NAME "-i $PWD/PATCH" &, then $(L NAME) below
echo "builds $(( $(date +%s) - t0 )) s"; grep -H "fd_megakernel \|o_proj_router" lab/*/build.log
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
mkdir -p /tmp/t build/kernels/sm_90a && cp lab/main/lib/* build/kernels/sm_90a/
export FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py tests/test_generate.py 2>&1 | tail -6
echo "tests $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep --variants "${VARIANTS:-default,router_in_o_proj,router_in_o_proj merge_v_parts=2}" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace --router-in-o-proj --out /tmp/t/trace.json 2>&1 | grep -v Warning | tail -40
[ -n "$OUT" ] && tar czf $OUT/next.tgz -C /tmp/t .
echo "all done $(( $(date +%s) - t0 )) s"
