# As run for sweep 71 (2026-12-03, third session): what the signal's release and the wait's acquire cost,
# timing only (docs/measurements/knockouts/signal-fences-off.patch; wrong memory ordering on purpose):
# lab/views (main's kernels), lab/norel (relaxed signal), lab/noacq (relaxed polls), lab/neither (both),
# all built on the laptop and carried.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t; rm -f /tmp/t/*
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/views/lib/libfleet_kernels.so
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L views) $(L norel) $(L noacq) $(L neither) \
  --variants "default@views,default@norel,default@noacq,default@neither" --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 80 python3 -m fleet_decode.kernels.trace $(L neither) --out /tmp/t/trace.json 2>&1 | grep -v Warning | grep -v " us  " | tail -24
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
