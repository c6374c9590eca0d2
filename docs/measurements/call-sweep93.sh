# Sweep 93, prepared 2026-12-04 (eighth session), run in the ninth session (2026-12-04) with stage_ahead=next-layer
# added (on main's kernels and on slim2). The megakernel with the kinds the default decode graph does not use compiled out (lab/slim: main's
# hip/ with docs/next/megakernel-slim.patch: ATTN_MERGE_UV, O_PROJ_ROUTER, ROUTE_PARTS_TOPK, GATE_UP,
# DOWN_ACCUM, EXPERT_GATE_UP, EXPERT_DOWN_ACCUM), after sweep 92 found an unused code path costing 4 %.
# Against main's kernels (lab/sk64c), one process each, at 1,024 and 4,096 positions. Build both on the laptop:
#   mkdir -p lab/slim && cp -r hip lab/slim/hip && (cd lab/slim && patch -p1 < ../../docs/next/megakernel-slim.patch)
#   PYTHONPATH=src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/slim/hip --out lab/slim/lib
# and likewise lab/slim2 from docs/next/megakernel-slim2.patch (also greedy only and only the chunk forms the
# decode plans use); carry lab/{sk64c,slim,slim2}/lib/libfleet_kernels.so.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
timeout 150 python3 -m fleet_decode.kernels.lab --sweep $(L slim) $(L slim2) --variants "stage_ahead=next-layer,default@slim,default@slim2,stage_ahead=next-layer@slim2" --out $T/sweep93.json 2>&1 \
  | grep -v Warning
echo "sweep93 $(( $(date +%s) - t0 )) s"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 $(L slim) $(L slim2) --variants "stage_ahead=next-layer,default@slim,default@slim2,stage_ahead=next-layer@slim2" \
  --out $T/sweep93-4096.json 2>&1 | grep -v Warning
echo "sweep93-4096 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
