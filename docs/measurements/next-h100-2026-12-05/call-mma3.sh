# Twelfth session (2026-12-05, an H100): lab/mma3 = lab/mma2 (the tensor-core chunk, padded shared rows) taken only
# by chunks of at least 512 heads x positions (8 heads x 64 at 4,096; the decode plan's 4 x 32 at 1,024 keeps the
# plain form, whose code comes back into the build). Carry lab/sk64c, lab/mma2 and lab/mma3's libraries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX); R=$PWD
MAIN=$R/lab/sk64c/lib/libfleet_kernels.so MMA2=$R/lab/mma2/lib/libfleet_kernels.so MMA3=$R/lab/mma3/lib/libfleet_kernels.so
FLEET_DECODE_KERNELS=$MMA3 timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tail -2
echo "tests $(( $(date +%s) - t0 )) s"
FLEET_DECODE_KERNELS=$MAIN timeout 120 python3 -m fleet_decode.kernels.lab --sweep --same --library mma3=$MMA3 \
  --variants "default@mma3" --out $T/sweep103.json 2>&1 | grep -v Warning
echo "sweep103 $(( $(date +%s) - t0 )) s"
FLEET_DECODE_KERNELS=$MAIN timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 --same --library mma3=$MMA3 \
  --library mma2=$MMA2 --variants "default@mma3,attn_head_groups=1@mma3,default@mma2" --out $T/sweep103-4096.json 2>&1 | grep -v Warning
echo "sweep103-4096 $(( $(date +%s) - t0 )) s"
FLEET_DECODE_KERNELS=$MAIN timeout 100 python3 -m fleet_decode.kernels.trace --prompt 4096 --library main=$MAIN \
  --library mma3=$MMA3 --out $T/trace124-4096.json 2>&1 | grep -v Warning | sed -n '/^per kind: run us/,$p' | head -40
echo "trace124-4096 $(( $(date +%s) - t0 )) s"
tar czf $OUT/mma3.tgz -C $T .
