# As run for sweep 83 (2026-12-03, sixth session; first call). The split-K default against: 32 sum tiles
# (sum_rows=64, host side: lab/src-exp/src = src/ with docs/next/split-k-sum-rows.patch), the q/kv tiles staged
# ("stage all": their copies now leave after the worker's expert slice, in the window's tail), the router in
# the o_proj tiles, the top-k as a tail of the router, the stage's early-send policies; and lab/shlate
# (hip/ with the shared slices' first down rows copied after their gate/up rows, not beside them: fewer bytes
# in flight while the router and the top-k run). Carry lab/src-exp and the two libraries.
export PYTHONPATH=$PWD/lab/src-exp/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@sk64c,sum_rows=64@sk64c,stage all@sk64c,stage all + sum_rows=64@sk64c,default@shlate"
V="$V,sum_rows=64@shlate,stage all + sum_rows=64@shlate,router_in_o_proj=true@sk64c,tails topk@sk64c"
V="$V,stage_ahead=early@sk64c,stage_ahead=next-layer@sk64c"
timeout 260 python3 -m fleet_decode.kernels.lab --sweep $(L sk64c) $(L shlate) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
for tr in "stage all + sum_rows=64|sk64c" "default|shlate"; do
  timeout 70 python3 -m fleet_decode.kernels.trace --variant "${tr%|*}" $(L ${tr#*|}) --out $T/trace.json \
    --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -14
done
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
