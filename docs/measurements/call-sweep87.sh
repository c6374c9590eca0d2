# Sweep 87 (2026-12-04, eighth session): knobs around the new decode defaults (row_align 4, 8 absorb parts,
# dense split-K: sweep 86), this tree's host side on main's kernels (lab/sk64c, built from hip/ on the laptop),
# and the new defaults at 4,096 positions against the old ones. Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
V="default,absorb_parts=16,sum_rows=32,sum_rows=128,split_k_shared_tiles=66,merge_lat_parts=2"
V="$V,tails topk,stage_ahead=next-layer,stage_ahead=early,default"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
OLD="row_align=8 + absorb_parts=4 + dense_split_k=false"
V2="default,$OLD,absorb_parts=4,dense_split_k=false,stage_ahead=from-down,default"
timeout 120 python3 -m fleet_decode.kernels.lab --sweep --variants "$V2" --out $T/sweep2.json 2>&1 | grep -v Warning
echo "sweep2 $(( $(date +%s) - t0 )) s"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 --variants "default,$OLD,default" \
  --out $T/sweep4096.json 2>&1 | grep -v Warning
echo "sweep4096 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
