# Twenty-second session, prepared for the next (not yet run): docs/next/README.md item 11's form (c) in its smallest
# lab form (fxsum.patch, kernel only). Every split-K slice (shared, routed, the dense layer's) adds its 2,048-wide
# partial as int64 in units of 2^-32 (`red.relaxed.gpu.global.add.u64`) into ONE accumulator at the start of the
# layer's partials buffer, instead of storing its own partial row; each sum tile reads its rows of that accumulator,
# zeroes them for the next step and adds them into the residual. The graph is main's (the buffer is big enough; the
# slices' row argument is ignored). Tokens may differ from main's at near-ties (another rounding of the sum); the
# sweep prints max |dlogit|. Build on the laptop: mkdir -p lab/fxsum && cp -r hip lab/fxsum/ && (cd lab/fxsum &&
# patch -p0 < ../../docs/next/fixed-point-sum/fxsum.patch) && python -m fleet_decode.kernels.build --arch sm_90a
# --hip-dir lab/fxsum/hip --out lab/fxsum/lib (255 registers, no spills). Also runs red64_loaded (the adds' cost at
# the end of a streamed slice; docs/measurements/red64-2026-12-07/). Carry lab/main24/lib/libfleet_kernels.so,
# lab/fxsum/lib/libfleet_kernels.so and lab/red64_loaded. BUDGET: seconds (default 200).
#   bash docs/next/fixed-point-sum/call-fxsum.sh    (from the repository root)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); L=$PWD/lab; MAIN=$L/main24/lib/libfleet_kernels.so; FX=$L/fxsum/lib/libfleet_kernels.so
left() { echo $(( ${BUDGET:-200} - ($(date +%s) - t0) - 5 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
./lab/red64_loaded | tee $OUT/red64-loaded.txt
for prompt in 1024 4096; do
  [ $(left) -gt 30 ] || break
  FLEET_DECODE_KERNELS=$MAIN timeout $(left) python3 -m fleet_decode.kernels.lab --sweep --prompt $prompt \
    --library fxsum=$FX --variants "default,default@fxsum" --out $OUT/sweep-$prompt-fxsum.json 2>&1 | grep -v Warning | tail -3
  echo "sweep $prompt $(( $(date +%s) - t0 )) s"
done
if [ $(left) -gt 40 ]; then
  FLEET_DECODE_KERNELS=$MAIN timeout $(left) python3 -m fleet_decode.kernels.trace --prompt 1024 --variant default \
    --library main=$MAIN --library fxsum=$FX --out $OUT/trace-1024-fxsum.json 2>&1 | grep -v Warning \
    | grep -E "^MoE layer:|SUM_PARTIALS|GATE_UP_DOWN|^out |moe_slices"
  echo "trace $(( $(date +%s) - t0 )) s"
fi
