# As run for sweep 68 (2026-12-03, third session): the task views resolved on the host, the stage's
# source in its table and thread 0's inputs cached in shared memory (lab/views, this tree's hip/ built
# on the laptop and carried), timed against the same library with Tuning.host_views off.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t
export FLEET_DECODE_KERNELS=$PWD/lab/views/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep \
  --variants "default,host_views=false,host_views=true,stage_ahead=from-down" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
for v in default host_views=false; do
  timeout 60 python3 -m fleet_decode.kernels.trace --variant "$v" --out /tmp/t/trace-$v.json --raw /tmp/t/trace-$v.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -42
done
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
