# As run for sweep 81 (2026-12-03, fifth session; fourth call, after the pipeline). The split-K default's shared
# slices after the top-k (one stage with the routed slices) or after the router's logits: host side only,
# lab/src-exp/src = src/ with docs/next/split-k-shared-after-topk.patch (not on main: it would stale the H200
# evidence), on main's kernels (lab/sk64c, built from hip/). Carry lab/src-exp and the library.
export PYTHONPATH=$PWD/lab/src-exp/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
V="default,shared_after_topk=true,shared_after_topk=true + split_k_shared_tiles=0,shared_after_router=true,moe_tiles=routing-free"
timeout 90 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 70 python3 -m fleet_decode.kernels.trace --variant "shared_after_topk=true + split_k_shared_tiles=0" \
  --library new=$PWD/lab/sk64c/lib/libfleet_kernels.so --out $T/trace.json --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -14
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
