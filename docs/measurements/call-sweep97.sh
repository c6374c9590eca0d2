# Sweep 97 and traces 118-119 (2026-12-04, ninth session): the attention chunk's weighted sum by quarters of the
# positions. Phase marks (phases/phases3-*-h200.txt) put a chunk's weighted sum at 3.8 of 8.9 us (1,024
# positions) and 6.7 of 16.3 (4,096), each of the 4 groups of 64 threads reading every row for its 2 heads.
# lab/c4g: each group sums all 8 heads over a quarter of the positions (each row read once by the block, a
# quarter of the batches), the quarters added in the scratch as ((q0 + q2) + (q1 + q3))
# (docs/dropped/chunk-sum-by-positions.patch); lab/c256b8 as in sweep 96. "default@same" is main's library under
# another name. One process a length; then the per-kind traces of main and c4g at both lengths (a build's
# other kinds move with its code generation, sweeps 93-96: the chunk's own run is what the change is for).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
LIBS="$(L c4g) $(L c256b8) --library same=$PWD/lab/sk64c/lib/libfleet_kernels.so"
for P in 1024 4096; do
  timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt $P $LIBS --variants "default@same,default@c4g,default@c256b8" \
    --out $T/sweep97-$P.json 2>&1 | grep -v Warning
  echo "sweep97-$P $(( $(date +%s) - t0 )) s"
  timeout 120 python3 -m fleet_decode.kernels.trace --prompt $P $(L sk64c) $(L c4g) $(L c256b8) --out $T/trace118-$P.json 2>&1 \
    | grep -v Warning | grep -i "MoE layer:"
  echo "trace118-$P $(( $(date +%s) - t0 )) s"
done
tar czf $OUT/next.tgz -C $T .
