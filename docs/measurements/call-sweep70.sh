# As run for sweep 70 (2026-12-03, third session): Tuning and Plan variants re-timed on the host views
# (this tree at the commit that adds this file; lab/views carried): tails, the router in the o_proj tiles,
# and the router or the q-absorb unstaged (their tiles now often land after the task is ready).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t; rm -f /tmp/t/*
export FLEET_DECODE_KERNELS=$PWD/lab/views/lib/libfleet_kernels.so
timeout 300 python3 -m fleet_decode.kernels.lab --sweep \
  --variants "default,tails,tail_kinds=ROUTE_TOPK,router_in_o_proj,staged_kinds=ROPE_Q_ABSORB/O_PROJ_RESIDUAL/O_PROJ_ROUTER/ATTN_MERGE_COLS/ATTN_MERGE_UV,staged_kinds=ROUTER/O_PROJ_RESIDUAL/O_PROJ_ROUTER/ATTN_MERGE_COLS/ATTN_MERGE_UV,host_views=true" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
