# Twenty-first session: docs/measurements/l2-evict-first-2026-12-07/call-l2-evict-first.sh's two sweeps in ONE process where three libraries fit (an
# H200: main, lab/ef1, lab/ef2), at 1,024 and then 4,096 positions. Carry lab/{main,ef1,ef2}/lib/libfleet_kernels.so.
#   BUDGET=150 bash docs/measurements/l2-evict-first-2026-12-07/call-l2-evict-first-h200.sh    (from the repository root)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); L=$PWD/lab
nvidia-smi --query-gpu=name --format=csv,noheader
for prompt in 1024 4096; do
  left=$(( ${BUDGET:-150} - ($(date +%s) - t0) - 5 )); [ $left -gt 40 ] || break
  FLEET_DECODE_KERNELS=$L/main/lib/libfleet_kernels.so timeout $left python3 -m fleet_decode.kernels.lab --sweep \
    --prompt $prompt --library ef1=$L/ef1/lib/libfleet_kernels.so --library ef2=$L/ef2/lib/libfleet_kernels.so \
    --variants "default,default@ef1,default@ef2" --out $OUT/sweep118-$prompt-ef.json 2>&1 | grep -v Warning | tail -5
  echo "$prompt $(( $(date +%s) - t0 )) s"
done
