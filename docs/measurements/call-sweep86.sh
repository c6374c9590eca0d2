# Prepared 2026-12-04 (seventh session); run in the eighth (a second sweep process added then).
# This tree's host side (q/kv staged, 32 sum tiles: the defaults since fe276fd) on main's kernels (lab/sk64c,
# built from hip/ on the laptop): re-times sweep 85's variants, whose results were lost, and the untimed
# options: the dense layer's MLP as split-K slices (Plan.dense_split_k), the q-absorb unstaged, 8 absorb parts,
# chunks of 16 positions in two head groups. Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
NO_ABSORB=RMSNORM_GEMV/ATTN_MERGE_UV/O_PROJ_RESIDUAL/ROUTER/O_PROJ_ROUTER/ATTN_MERGE_COLS
V="default,row_align=4,dense_split_k=true,dense_split_k=true + row_align=4,absorb_parts=8,staged_kinds=$NO_ABSORB"
V="$V,attn_head_groups=2 + attn_chunk=16,split_k_skew=16 + row_align=4,default"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 70 python3 -m fleet_decode.kernels.trace --variant "dense_split_k=true + row_align=4" --out $T/trace.json \
  --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -14
echo "trace $(( $(date +%s) - t0 )) s"
V2="default,row_align=2,dense_split_k=true + row_align=4 + absorb_parts=8,dense_split_k=true + row_align=4 + attn_head_groups=2 + attn_chunk=16,dense_split_k=true + row_align=4 + split_k_skew=16,default"
timeout 120 python3 -m fleet_decode.kernels.lab --sweep --variants "$V2" --out $T/sweep2.json 2>&1 | grep -v Warning
echo "sweep2 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
