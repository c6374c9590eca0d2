# Twentieth session (2026-12-07): the top-k on an idle worker (docs/dropped/top-k-on-an-idle-worker.patch), with and
# without its code warmed by warp 1 (lab/tkwarm, docs/dropped/top-k-code-warmed.patch), one sweep at 1,024 positions,
# main's build and tkwarm in one process. Carry lab/{main,tkwarm}/lib/libfleet_kernels.so. BUDGET (default 100).
#   bash docs/measurements/l2-evict-first-2026-12-07/call-topk-idle.sh    (from the repository root)
. docs/next/patched-src.sh docs/dropped/top-k-on-an-idle-worker.patch
FLEET_DECODE_KERNELS=$L/main/lib/libfleet_kernels.so timeout $(( ${BUDGET:-100} - 5 )) python3 -m fleet_decode.kernels.lab \
  --sweep --prompt 1024 --library tkwarm=$L/tkwarm/lib/libfleet_kernels.so \
  --variants "default,topk idle,default@tkwarm,topk idle@tkwarm" --out $OUT/sweep117-1024.json 2>&1 | grep -v Warning | tail -6
echo "topk idle $(( $(date +%s) - t0 )) s"
