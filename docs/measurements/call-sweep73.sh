# As run for sweep 73 (2026-12-03, third session): the q/kv tiles staged again (part 13's "stage all", with
# the next layer's tiles sent from the down tiles or the first free entry), re-timed on the host views
# (main's kernels, lab/views carried).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t; rm -f /tmp/t/*
export FLEET_DECODE_KERNELS=$PWD/lab/views/lib/libfleet_kernels.so
timeout 150 python3 -m fleet_decode.kernels.lab --sweep \
  --variants "default,stage all,stage all + stage_ahead=from-down,stage all + stage_ahead=next-layer,host_views=true" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
