# As run for sweep 82 (2026-12-03, fifth session; fifth call, after the pipeline). The split-K default's plan
# knobs: fewer, longer sum tiles (host side only, lab/src-exp/src = src/ with docs/next/split-k-sum-rows.patch,
# not on main), the list stride, the shared slices' count, the list scheduler's task overhead; on main's
# kernels (lab/sk64c, built from hip/). Carry lab/src-exp and the library.
export PYTHONPATH=$PWD/lab/src-exp/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
V="default,sum_rows=32,sum_rows=64,sum_rows=128,worker_stride=1,split_k_shared_tiles=100,split_k_shared_tiles=110"
V="$V,task_overhead=16384,task_overhead=1024"
timeout 120 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
