#!/bin/bash
# One device call (fifth session): each head's merge in 1, 2 or 4 tasks (Plan.merge_v_parts) timed
# in one process, a trace with 2, and the GPU tests of this tree's kernels.
#   bash docs/next/run.sh        # on the H200, from the repository root (needs lab/ ignored: .git/info/exclude)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s)
mkdir -p /tmp/t && python3 -m fleet_decode.kernels.build --arch sm_90a --out build/kernels/sm_90a --jobs 14 > /tmp/t/build.log 2>&1 || tail -20 /tmp/t/build.log
echo "build $(( $(date +%s) - t0 )) s"; grep "fd_megakernel \|merge" /tmp/t/build.log
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep --variants "${VARIANTS:-default,merge_v_parts=2,merge_v_parts=4}" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace --merge-v-parts 2 --out /tmp/t/trace.json 2>&1 | grep -v Warning | tail -40
[ -n "$OUT" ] && tar czf $OUT/next.tgz -C /tmp/t .
echo "all done $(( $(date +%s) - t0 )) s"
