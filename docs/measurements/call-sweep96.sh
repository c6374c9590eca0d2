# Sweep 96 (2026-12-04, ninth session): the attention chunk's weighted sum split over positions for the
# runtime's 256 threads. With 8 heads a task (the decode plans' 2 head groups) each of the 4 groups of 64 threads
# summed 2 heads over all the chunk's rows, len / 4 batches in a row; lab/c256: groups 0-1 sum 4 heads each over
# the first half of the positions, groups 2-3 over the second, the halves meet in the scratch
# (docs/dropped/chunk-sum-by-positions.patch); lab/c256b8: the same, 8 rows a batch. "default@same" is main's
# library again under another name: how far two timings of one binary fall apart in one process. Against main's
# kernels (lab/sk64c), one process each, at 1,024 and 4,096 positions.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
LIBS="$(L c256) $(L c256b8) --library same=$PWD/lab/sk64c/lib/libfleet_kernels.so"
V="default@same,default@c256,default@c256b8,stage_ahead=next-layer@c256b8"
for P in 1024 4096; do
  timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt $P $LIBS --variants "$V" \
    --out $T/sweep96-$P.json 2>&1 | grep -v Warning
  echo "sweep96-$P $(( $(date +%s) - t0 )) s"
done
timeout 120 python3 -m fleet_decode.kernels.trace --prompt 4096 $(L sk64c) $(L c256b8) --out $T/trace117-4096.json 2>&1 \
  | grep -v Warning | grep -i "MoE layer:"
echo "trace117 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
