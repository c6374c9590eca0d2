# As run for sweep 72 (2026-12-03, third session): stage_ahead=successor-unstaged (docs/dropped/successor-unstaged.patch,
# applied to the working tree for the call; host side only, so lab/views = main's kernels, carried),
# with and without the o_proj tiles staged (unstaged, the router's tile travels during the o_proj tile).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t; rm -f /tmp/t/*
export FLEET_DECODE_KERNELS=$PWD/lab/views/lib/libfleet_kernels.so
NO_OPROJ=staged_kinds=ROPE_Q_ABSORB/ROUTER/O_PROJ_ROUTER/ATTN_MERGE_COLS/ATTN_MERGE_UV
timeout 200 python3 -m fleet_decode.kernels.lab --sweep \
  --variants "default,stage_ahead=successor-unstaged,stage_ahead=successor-unstaged + $NO_OPROJ,$NO_OPROJ,host_views=true" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m fleet_decode.kernels.trace --variant "stage_ahead=successor-unstaged + $NO_OPROJ" --out /tmp/t/trace.json 2>&1 | grep -v Warning | grep -v " us  " | tail -24
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
