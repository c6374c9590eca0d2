# Sweep 94 (2026-12-04, ninth session): the attention chunk's weighted sum over both halves of the block.
# With 8 heads a task (the decode plans' 2 head groups) the sum used 4 of the block's 8 groups of 64 threads
# and waited for len / 4 batches of rows (phase marks, part 18: 3.8 of the chunk's 8.9 us at 1,024 positions).
# lab/wsum: the other 4 groups take the second half of the positions, the halves' sums meet in the scratch;
# lab/wsum8: the same with 8 rows in flight a batch instead of 4. Against main's kernels (lab/sk64c), one
# process each, at 1,024 and 4,096 positions. Build on the laptop (hip/ as at the sweep's commit, with
# attention_chunk.cu as in docs/dropped/chunk-sum-idle-half.patch):
#   PYTHONPATH=src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/wsum/hip --out lab/wsum/lib
# carry lab/{sk64c,wsum,wsum8}/lib/libfleet_kernels.so.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@wsum,default@wsum8,stage_ahead=next-layer@wsum8"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep $(L wsum) $(L wsum8) --variants "$V" --out $T/sweep94.json 2>&1 \
  | grep -v Warning
echo "sweep94 $(( $(date +%s) - t0 )) s"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 $(L wsum) $(L wsum8) --variants "$V" \
  --out $T/sweep94-4096.json 2>&1 | grep -v Warning
echo "sweep94-4096 $(( $(date +%s) - t0 )) s"
timeout 120 python3 -m fleet_decode.kernels.trace --prompt 4096 $(L sk64c) $(L wsum8) --out $T/trace115-4096.json 2>&1 \
  | grep -v Warning | tail -40
echo "trace115 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
