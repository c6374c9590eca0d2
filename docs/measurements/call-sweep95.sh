# Sweep 95 (2026-12-04, ninth session): each task kind compiled as a function of its own.
# Sweep 94 timed lab/wsum, whose change to the attention chunk was never taken (the runtime's blocks have 256
# threads: 4 groups of 64, no idle half), at +1.8 % (1,024 positions) and -1.2 % (4,096): the megakernel's
# speed moves by its code generation alone. lab/iso: main's hip/ with fd_run_task called through a switch of
# __noinline__ fd_run_kind<KIND> (docs/dropped/kinds-as-functions.patch); lab/iso2: the same with the
# two slice kinds (GATE_UP_DOWN, EXPERT_GATE_UP_DOWN) left inline; lab/isob8: iso with the chunk's weighted
# sum 8 rows a batch (4 on main). Against main's kernels (lab/sk64c), one process each, at 1,024 and 4,096.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@iso,default@iso2,default@isob8"
for P in 1024 4096; do
  timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt $P $(L iso) $(L iso2) $(L isob8) --variants "$V" \
    --out $T/sweep95-$P.json 2>&1 | grep -v Warning
  echo "sweep95-$P $(( $(date +%s) - t0 )) s"
done
timeout 120 python3 -m fleet_decode.kernels.trace $(L sk64c) $(L iso) --out $T/trace116.json 2>&1 | grep -v Warning | grep -i "MoE layer:"
echo "trace116 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
