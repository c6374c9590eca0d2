# As run for sweep 65 (2026-12-03); the cache-append patch has since moved to docs/dropped/.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t
for p in docs/measurements/knockouts/attention-stages-off.patch docs/next/cache-append-tail.patch; do patch -p1 -s < $p || echo "PATCH FAIL $p"; done
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
FLEET_DECODE_KERNELS=$PWD/lab/pollf/lib/libfleet_kernels.so timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py -k "watchdog or stop or tails" 2>&1 | tail -3
echo "tests $(( $(date +%s) - t0 )) s"
timeout 330 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L pollf) $(L polla) $(L refactor) \
  --variants "default@main,default@pollf,default@polla,default@refactor,tail_kinds=CACHE_APPEND@main,knock_absorb=true@main,knock_absorb=true + tail_kinds=CACHE_APPEND@main,knock_chunks=true@main,knock_merge=true@main,tail_kinds=CACHE_APPEND@pollf,default@main,default@pollf" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace $(L main) $(L pollf) --out /tmp/t/trace.json --raw /tmp/t/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -40
echo "trace $(( $(date +%s) - t0 )) s"
timeout 90 python3 docs/measurements/phases/phase.py lab/phase/lib/libfleet_kernels.so > /tmp/t/phase.txt 2>&1; tail -30 /tmp/t/phase.txt
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
