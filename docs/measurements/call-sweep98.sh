# Sweep 98 and trace 119 (2026-12-04, ninth session): staged GEMV tiles four rows a warp pass. Nsight Compute
# (part 19) put a third of the q/kv and o_proj tiles' stall samples on short-scoreboard waits: their weights come
# from shared memory, two rows a warp pass, one 16-byte piece a row in flight. lab/st4: main's hip/ with
# fd_staged_weights::kRows = 4 (fd_gemv_rows' rows a pass for staged weights; global weights keep 2)
# (docs/next/staged-gemv-four-rows.patch). Judged by the q/kv (RMSNORM_GEMV) and o_proj runs in the trace, the
# step against "same" (main's library again): a build's code generation alone moves a step 2-5 %.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
LIBS="$(L st4) --library same=$PWD/lab/sk64c/lib/libfleet_kernels.so"
timeout 100 python3 -m fleet_decode.kernels.lab --sweep $LIBS --variants "default@same,default@st4" --out $T/sweep98.json 2>&1 \
  | grep -v Warning
echo "sweep98 $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace $(L sk64c) $(L st4) --out $T/trace119.json 2>&1 | grep -v Warning \
  | grep -i "MoE layer:"
echo "trace119 $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 $LIBS --variants "default@same,default@st4" \
  --out $T/sweep98-4096.json 2>&1 | grep -v Warning
echo "sweep98-4096 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
