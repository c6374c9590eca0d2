# Sweep 90 (2026-12-04, eighth session; fifth call): the router in the o_proj tiles (Plan.router_in_o_proj: no
# router stage, the top-k from the o_proj tiles' partial dot products) re-timed on the 080f87d defaults, beside
# the two-part merge it implies (merge_lat_parts=1), and the stage copies sent a layer ahead. main's kernels
# (lab/sk64c, built from hip/ on the laptop). Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
V="default,router_in_o_proj=true,merge_lat_parts=1,stage_ahead=next-layer,router_in_o_proj=true + stage_ahead=next-layer,default"
timeout 120 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep90.json 2>&1 | grep -v Warning
echo "sweep90 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
