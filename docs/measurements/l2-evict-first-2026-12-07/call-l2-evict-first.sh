# Twenty-first session (2026-12-07): the streamed weights marked evict-first in L2 (docs/measurements/l2-evict-first-2026-12-07/l2-streams-evict-first.patch),
# so that ~170 MB of weights a layer stop evicting the kernel's code, the cache rows and the activations from L2
# (part 23: the top-k's cold code costs it ~2 us). lab/ef1: the direct loads (ld.global.cs); lab/ef2: also the
# stage's bulk copies (an L2::evict_first cache hint). One sweep process per patched build, each beside main's build
# (two libraries fit an H100), then a trace of main and ef2 side by side (per kind), at 1,024 positions; a sweep at
# 4,096 if time is left. Carry lab/{main,ef1,ef2}/lib/libfleet_kernels.so. BUDGET: seconds (default 300).
#   bash docs/measurements/l2-evict-first-2026-12-07/call-l2-evict-first.sh    (from the repository root)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); L=$PWD/lab; MAIN=$L/main/lib/libfleet_kernels.so
left() { echo $(( ${BUDGET:-300} - ($(date +%s) - t0) - 5 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
sweep() {  # name, prompt, library
  [ $(left) -gt 40 ] || return
  FLEET_DECODE_KERNELS=$MAIN timeout $(left) python3 -m fleet_decode.kernels.lab --sweep --prompt $2 \
    --library $3=$L/$3/lib/libfleet_kernels.so --variants "default,default@$3" --out $OUT/$1.json 2>&1 \
    | grep -v Warning | tail -4
  echo "$1 $(( $(date +%s) - t0 )) s"
}
sweep sweep118-1024-ef1 1024 ef1
sweep sweep119-1024-ef2 1024 ef2
if [ $(left) -gt 50 ]; then
  FLEET_DECODE_KERNELS=$MAIN timeout $(left) python3 -m fleet_decode.kernels.trace --prompt 1024 --variant default \
    --library main=$MAIN --library ef2=$L/ef2/lib/libfleet_kernels.so --out $OUT/trace128-1024-ef2.json 2>&1 \
    | grep -v Warning | grep -A40 "^per kind"
  echo "trace128 $(( $(date +%s) - t0 )) s"
fi
sweep sweep120-4096-ef2 4096 ef2
