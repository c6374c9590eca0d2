# As run for sweep 67 (2026-12-03, third session): main (with docs/next/cleanups-declared-sources.patch),
# pre (the chunk's first rows loaded before its q copy), wake (docs/measurements/phases/wake-marks.patch);
# all three built on the laptop and carried (lab/NAME/lib/libfleet_kernels.so).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/pre/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
timeout 240 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L pre) \
  --variants "default@main,default@pre,merge_waits_for_group=true@main,router_rows=4@main,router_rows=2@main,stage_ahead=from-down@main,merge_waits_for_group=true + router_rows=4@pre,default@main,default@pre,router_rows=4@pre" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace $(L main) $(L pre) $(L wake) --out /tmp/t/trace.json --raw /tmp/t/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -60
echo "trace $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m fleet_decode.kernels.trace $(L pre) --variant "merge_waits_for_group=true + router_rows=4" --out /tmp/t/trace-var.json 2>&1 | grep -v Warning | grep -v " us  " | tail -30
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
