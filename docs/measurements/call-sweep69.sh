# As run for sweep 69 (2026-12-03, third session): this tree's kernels (lab/views: host views, thread 0's
# waits in one form per source) with the cache append counting on the q-absorb's event, against it off,
# the stage-ahead policies again (tasks now ready sooner after their reach), and host_views off.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t; rm -f /tmp/t/*
export FLEET_DECODE_KERNELS=$PWD/lab/views/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
timeout 260 python3 -m fleet_decode.kernels.lab --sweep \
  --variants "default,append_signals_absorb=false,stage_ahead=early,stage_ahead=next-layer,stage_ahead=from-down,host_views=false,host_views=true" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m fleet_decode.kernels.trace --out /tmp/t/trace-default.json 2>&1 | grep -v Warning | grep -v " us  " | tail -40
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
