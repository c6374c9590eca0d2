# As run for sweep 84 (2026-12-03, sixth session; second call). This tree's host side (q/kv tiles staged,
# 32 sum tiles: the new default) on main's kernels (lab/sk64c, built from hip/), against: the stage yielded
# to the router (its worker's o_proj tile unstaged, sending the router's tile while it runs) and to the
# q-absorb, the q-absorb in fewer, longer tasks, the sum in 64 or 16 tiles, the q/kv tiles unstaged again.
# Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
V="default,stage_yield=ROUTER,stage_yield=ROUTER + stage_ahead=early,stage_yield=ROUTER/ROPE_Q_ABSORB"
V="$V,absorb_parts=2,absorb_parts=1,stage_yield=ROUTER + absorb_parts=2,sum_rows=32,sum_rows=128,stage no q/kv"
timeout 240 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 70 python3 -m fleet_decode.kernels.trace --variant "stage_yield=ROUTER" --out $T/trace.json \
  --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -14
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
