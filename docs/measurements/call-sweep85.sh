# Its results did not come back: the session was cut off before they were extracted; sweep 86 re-times its variants.
# As run for sweep 85 (2026-12-03, sixth session; third call). This tree's host side (the new default: q/kv
# tiles staged, 32 sum tiles) on main's kernels (lab/sk64c, built from hip/): the GPU tests, then the routed
# slices skewed (Plan.split_k_skew: longer on the workers that run no shared slice) and q/kv tiles of 28 rows
# (row_align=4: 131 tiles, and 16 router tiles of 4 experts). Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
V="default,split_k_skew=8,split_k_skew=16,split_k_skew=24,row_align=4,split_k_skew=16 + row_align=4"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 70 python3 -m fleet_decode.kernels.trace --variant "split_k_skew=16" --out $T/trace.json \
  --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -14
echo "trace $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
timeout 200 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -6
echo "all $(( $(date +%s) - t0 )) s"
