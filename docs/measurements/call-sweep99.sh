# Sweep 99 and trace 120 (2026-12-04, ninth session): sweep 98's staged GEMVs four rows a pass (lab/st4) with the
# top-k's registers sized to the model's 64 experts (lab/st4tk: kMaxExperts 64, two experts a lane instead of
# eight; lab only, the real config's count). In sweep 98 the unchanged top-k ran 3.25 -> 4.89 us with st4's code
# generation. Against main's kernels and main's library again ("same"), one process; trace main and st4tk.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
LIBS="$(L st4) $(L st4tk) --library same=$PWD/lab/sk64c/lib/libfleet_kernels.so"
timeout 100 python3 -m fleet_decode.kernels.lab --sweep $LIBS --variants "default@same,default@st4,default@st4tk" \
  --out $T/sweep99.json 2>&1 | grep -v Warning
echo "sweep99 $(( $(date +%s) - t0 )) s"
timeout 90 python3 -m fleet_decode.kernels.trace $(L sk64c) $(L st4tk) --out $T/trace120.json 2>&1 | grep -v Warning \
  | grep -i "MoE layer:"
echo "trace120 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
