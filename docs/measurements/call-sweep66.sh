# As run for sweep 66 and trace 83 (2026-12-03); the half-row patch is now docs/dropped/merge-wuv-half-rows.patch.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
FLEET_DECODE_KERNELS=$PWD/lab/halfrow/lib/libfleet_kernels.so timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py -k "merge" 2>&1 | tail -3
echo "tests $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L halfrow) \
  --variants "default@main,default@halfrow" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 90 python3 -m fleet_decode.kernels.trace $(L halfrow) --out /tmp/t/trace.json 2>&1 | grep -v Warning | grep -E "ATTN_MERGE|chain|attn_merge|untraced"
tar czf $OUT/next.tgz -C /tmp/t .
