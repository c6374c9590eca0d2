# Twenty-third session, prepared for the next (not yet run): the fixed-point sum and the routed rows handed out at
# run time, both plan options on main since bb4a3be (docs/megakernel.md part 26), timed against main's default in
# ONE process of main's own build (no lab build: both run on main's library, the pools on its pool entries).
#   1. the GPU tests of what is new (the per-kind M1 checks of SUM_FIXED_POINT and EXPERT_POOL on the device; the
#      fixed-point sum bit-identical run to run and as a tail; 64-row pieces bit-identical to the static slices);
#   2. the sweep at 1,024 and 4,096 positions: default, the fixed-point sum, as a tail, pools of 16/32/64 rows, and
#      pool 32 with every piece's adds (no per-taker sum first);
#   3. a trace of the best-looking pool (TRACE, default "pool 32") beside default: routed_slice_ends_us says
#      whether the window's tail (~3 us from the median slice to the last, part 25) is gone.
# Build main's library on the laptop first (nvcc compiles sm_90a without a GPU; ~50 s):
#   python -m fleet_decode.kernels.build --arch sm_90a --out lab/main26/lib --jobs 2
# and carry lab/main26/lib/libfleet_kernels.so (13 MB). BUDGET: seconds (default 560); TEST_S=0 skips the tests;
# VARIANTS (comma-separated) replaces the sweep's list; SWEEP_S caps each sweep; TRACE=none skips the trace.
#   bash docs/next/pool/call-pool.sh    (from the repository root; on an H100 or an H200)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/main26/lib/libfleet_kernels.so
t0=$(date +%s)
left() { echo $(( ${BUDGET:-560} - ($(date +%s) - t0) - 5 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
if [ "${TEST_S:-150}" != 0 ]; then
  timeout ${TEST_S:-150} python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_kernels_gpu.py \
    tests/test_megakernel_gpu.py -k "fixed_point or routed_rows or every_task_kernel or one_layer" 2>&1 | tail -8
  echo "${PIPESTATUS[0]}" > $OUT/tests.rc
  echo "tests rc=$(cat $OUT/tests.rc) $(( $(date +%s) - t0 )) s"
fi
VARIANTS=${VARIANTS:-"default,fixed-point sum,fixed-point sum tail,pool 16,pool 32,pool 64,pool 32 sum tail,pool 32 adds per piece"}
for prompt in 1024 4096; do
  [ $(left) -gt 60 ] || break
  cap=$(left); [ -n "$SWEEP_S" ] && [ "$SWEEP_S" -lt $cap ] && cap=$SWEEP_S
  timeout $cap python3 -m fleet_decode.kernels.lab --sweep --prompt $prompt --variants "$VARIANTS" \
    --out $OUT/sweep-$prompt-pool.json 2>&1 | grep -v Warning | tail -9
  echo "sweep $prompt $(( $(date +%s) - t0 )) s"
done
if [ "${TRACE}" != none ] && [ $(left) -gt 60 ]; then  # both variants in one process, side by side
  timeout $(left) python3 -m fleet_decode.kernels.trace --prompt 1024 --variant default --variant "${TRACE:-pool 32}" \
    --out $OUT/trace-1024-pool.json 2>&1 | grep -v Warning | grep -E "^MoE layer:|routed|^out |variant"
  echo "trace $(( $(date +%s) - t0 )) s"
fi
# kept on the machine for the pipeline call after it (docs/next/pool/call-pick-pipeline.sh picks the default from them)
mkdir -p lab/pool-out && cp $OUT/*.json $OUT/tests.rc lab/pool-out/ 2>/dev/null; ls lab/pool-out
