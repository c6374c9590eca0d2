# As run for sweep 77 (2026-12-03, fourth session; fourth call). Two dependent round trips taken off a
# tile's critical path: the routed down tile reads its expert and weight before the act's barrier
# (lab/downidx), the o_proj tile loads its residual rows beside x instead of after each row's dot
# (lab/resid), and both (lab/dr, the GPU tests run on it); against main at 33c1cad (lab/topk). Two
# samples of each build (default and host_views=true, the same plan). No traces: two refused starts left
# the session's device time for this sweep and the pipeline run only.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/dr/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
V=""
for b in topk downidx resid dr; do V="$V,default@$b,host_views=true@$b"; done
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L topk) $(L downidx) $(L resid) $(L dr) --variants "${V#,}" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
