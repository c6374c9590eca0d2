# Sweep 92 and trace 114 (2026-12-04, eighth session; tenth call): the routed split-K slices that route
# themselves (lab only: Plan.slices_route_themselves in the laptop's working tree, lab/selfroute = main's hip/
# with docs/dropped/slices-route-themselves.patch's kernel part): each slice waits for the router's logits and runs
# the top-k in its warp 0, instead of waiting for ROUTE_TOPK and reading route_idx. On the 080f87d defaults
# against main's kernels (lab/sk64c), one process; then the variant traced. Carry the two libraries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="slices_route_themselves=true@selfroute,default,default@selfroute,slices_route_themselves=true@selfroute"
timeout 100 python3 -m fleet_decode.kernels.lab --sweep $(L selfroute) --variants "$V" --out $T/sweep92.json 2>&1 \
  | grep -v Warning
echo "sweep92 $(( $(date +%s) - t0 )) s"
timeout 80 python3 -m fleet_decode.kernels.trace --variant "slices_route_themselves=true" $(L selfroute) \
  --out $T/trace114.json --raw $T/trace114.npz 2>&1 | grep -v Warning \
  | grep -E "^(kv_a|q_proj|q_absorb|attn|o_proj|router|route|moe|out|MoE|ROUTER|ROUTE|EXPERT|GATE|SUM)" | tail -24
echo "trace114 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
