#!/bin/bash
# One device call (docs/next/README.md): the GPU tests of this tree's kernels, a sweep of plan, tuning
# and kernel variants in one process, and a trace. Kernels built on the laptop travel with the call
# (carry lab/NAME/lib/libfleet_kernels.so; nvcc compiles sm_90a there); a missing one is built here.
#   bash docs/next/run.sh        # on the H200, from the repository root (needs lab/ ignored: .git/info/exclude)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); rm -rf /tmp/t  # the machines keep /tmp between sessions
build() { local d=$PWD/lab/$1; shift; [ -f $d/lib/libfleet_kernels.so ] && return 0
  rm -rf $d && mkdir -p $d && cp -r hip $d/ && (cd $d && for p in "$@"; do patch -p1 -s $p || exit 1; done) || return 1
  python3 -m fleet_decode.kernels.build --arch sm_90a --hip-dir $d/hip --out $d/lib --jobs 7 > $d/build.log 2>&1 || tail -20 $d/build.log; }
build main & wait  # a variant: build NAME "-i $PWD/PATCH" &, then $(L NAME) and "default@NAME" below
# GRAPH_PATCH: patches of the Python side (space-separated; a timing-only knockout's Plan fields, a tail
# kind) applied to this copy
for p in $GRAPH_PATCH; do patch -p1 -s < "$p" || { echo "GRAPH_PATCH $p does not apply"; exit 1; }; done
# CODESIZE=1: the megakernel's instructions per source line, and per task kind where nvdisasm offers -gi
if [ "${CODESIZE:-0}" = 1 ]; then
  cuda=${CUDA_BIN:-/usr/local/cuda-13.0/bin} root=$PWD
  mkdir -p /tmp/t/cubin && ( cd /tmp/t/cubin && $cuda/cuobjdump -xelf all $root/lab/main/lib/libfleet_kernels.so >/dev/null &&
    { $cuda/nvdisasm -gi -c megakernel.sm_90a.cubin 2>/dev/null || $cuda/nvdisasm -g -c megakernel.sm_90a.cubin; } > /tmp/t/mk.sass &&
    python3 $root/docs/next/code_size.py --by-task --top 60 < /tmp/t/mk.sass > /tmp/t/code_size.txt &&
    head -30 /tmp/t/code_size.txt; gzip -f /tmp/t/mk.sass ); rm -rf /tmp/t/cubin
fi
echo "builds $(( $(date +%s) - t0 )) s"
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
mkdir -p /tmp/t
export FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
[ "${TEST_S:-200}" = 0 ] || timeout ${TEST_S:-200} python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py \
  tests/test_generate.py 2>&1 | tail -8
echo "tests $(( $(date +%s) - t0 )) s"
timeout ${SWEEP_S:-200} python3 -m fleet_decode.kernels.lab --sweep \
  --variants "${VARIANTS:-default,tails,moe split-k-routed rows 48}" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
# TRACES: variants to trace (kernels.lab names or ' + '-joined parts), separated by ';'
IFS=';' read -ra traces <<< "${TRACES:-default}"
for i in "${!traces[@]}"; do
  echo "== trace $i: ${traces[$i]}"
  timeout ${TRACE_S:-100} python3 -m fleet_decode.kernels.trace --variant "${traces[$i]}" --out /tmp/t/trace$i.json \
    --raw /tmp/t/trace$i.npz 2>&1 | grep -v Warning | tail -40
done
[ -n "$OUT" ] && tar czf $OUT/next.tgz -C /tmp/t .
echo "all done $(( $(date +%s) - t0 )) s"
