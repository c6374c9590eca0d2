# Twentieth session (2026-12-07): docs/dropped/top-k-code-warmed.patch timed by two traces at 1,024 positions, each
# main's build beside one patched build in one process (two libraries fit an H100). Carry
# lab/{main,tknoinl,tkwarm}/lib/libfleet_kernels.so. BUDGET: seconds (default 150).
#   bash docs/next/call-topk-warm.sh    (from the repository root)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); L=$PWD/lab; MAIN=$L/main/lib/libfleet_kernels.so
nvidia-smi --query-gpu=name --format=csv,noheader
for n in tkwarm tknoinl; do
  left=$(( ${BUDGET:-150} - ($(date +%s) - t0) - 5 )); [ $left -gt 30 ] || break
  FLEET_DECODE_KERNELS=$MAIN timeout $left python3 -m fleet_decode.kernels.trace --prompt 1024 --variant default \
    --library main=$MAIN --library $n=$L/$n/lib/libfleet_kernels.so --out $OUT/trace127-1024-$n.json 2>&1 \
    | grep -v Warning | grep -A40 "^per kind"
  echo "$n $(( $(date +%s) - t0 )) s"
done
