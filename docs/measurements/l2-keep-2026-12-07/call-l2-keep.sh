# Twenty-second session (2026-12-07): what L2 keeps after part 24. Lab builds of main's hip/ (b2b17d3):
#   glob  the chunk's cache-row loads as ld.global.v4 (main's are generic loads): el's control, the same code
#   el    those loads marked evict-last (ld.global.L1::evict_last: SASS LDG.E.EL)
#   elall every fd_load16 evict-last (cache rows, activations, partials, views)
#   lmna  the LM head's weight loads as before part 24 (L1::no_allocate, normal in L2): its tiles ran 5 % longer
#   rtn   the router's unstaged loads not allocated in L1 and normal in L2 (its fp32 weights, 14 MB for 26 layers,
#         can then stay in L2 while everything streamed is evict-first); timed staged (default) and unstaged
# Each sweep is one process with two libraries (two fit an H100): `default` is the first named, `default@X` the
# second. Also: the routed slices' skew (Plan.split_k_skew) re-timed on main's build, and a trace of main's build
# with the raw words of steps 0-3 (per-worker timelines of the expert window: docs/next/window_tail.py). Carry lab/{main24,glob,el,elall,lmna,rtn}/lib/libfleet_kernels.so.
# BUDGET: seconds (default 380).
#   bash docs/measurements/l2-keep-2026-12-07/call-l2-keep.sh    (from the repository root; patches/ has the builds)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); L=$PWD/lab
left() { echo $(( ${BUDGET:-380} - ($(date +%s) - t0) - 5 )); }
nvidia-smi --query-gpu=name --format=csv,noheader
sweep() {  # name, prompt, base library, second library[, more variants]
  [ $(left) -gt 40 ] || return
  FLEET_DECODE_KERNELS=$L/$3/lib/libfleet_kernels.so timeout $(left) python3 -m fleet_decode.kernels.lab --sweep \
    --prompt $2 --library $4=$L/$4/lib/libfleet_kernels.so --variants "default,default@$4$5" --out $OUT/$1.json 2>&1 \
    | grep -v Warning | tail -5
  echo "$1 $(( $(date +%s) - t0 )) s"
}
sweep sweep122-1024-main-el 1024 main24 el
sweep sweep123-1024-glob-el 1024 glob el
sweep sweep124-1024-main-rtn 1024 main24 rtn \
  ",staged_kinds=RMSNORM_GEMV/ROPE_Q_ABSORB/ATTN_MERGE_UV/O_PROJ_RESIDUAL/O_PROJ_ROUTER/ATTN_MERGE_COLS@rtn"
if [ $(left) -gt 40 ]; then
  FLEET_DECODE_KERNELS=$L/main24/lib/libfleet_kernels.so timeout $(left) python3 -m fleet_decode.kernels.lab --sweep \
    --prompt 1024 --variants "default,split_k_skew=8,split_k_skew=16,split_k_skew=24" --out $OUT/sweep125-1024-skew.json \
    2>&1 | grep -v Warning | tail -5
  echo "sweep125 $(( $(date +%s) - t0 )) s"
fi
if [ $(left) -gt 45 ]; then
  FLEET_DECODE_KERNELS=$L/main24/lib/libfleet_kernels.so timeout $(left) python3 -m fleet_decode.kernels.trace \
    --prompt 1024 --variant default --out $OUT/trace129-1024-main.json --raw $OUT/trace129-raw.npz 2>&1 \
    | grep -v Warning | grep -B2 -A3 "^MoE layer:"
  echo "trace129 $(( $(date +%s) - t0 )) s"
fi
sweep sweep126-1024-main-lmna 1024 main24 lmna
sweep sweep127-4096-glob-el 4096 glob el
sweep sweep128-1024-main-elall 1024 main24 elall
