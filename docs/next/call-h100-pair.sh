# Nineteenth session (2026-12-07): the two prepared experiments in one call, for a machine lent for ~10 minutes
# (an H100 will do: both compare libraries within one process). The knockout at 1,024 positions first, then the
# flags' two sweeps at 1,024 (lab/slim and lab/noinl since the twentieth session), then the knockout at 4,096 if
# time is left. Carry lab/{main,knock,o2,xvec,slim,noinl}/lib/libfleet_kernels.so (52 MB; not .whl). BUDGET: seconds for the whole call (default 585).
#   bash docs/next/call-h100-pair.sh    (from the repository root)
t0=$(date +%s); B=${BUDGET:-585}
left() { echo $(( B - ($(date +%s) - t0) )); }
PROMPTS=1024 BUDGET=$(left) bash docs/next/call-knock-merge.sh && mv $OUT/knock.tgz $OUT/knock-1024.tgz
SHORT=1 BUDGET=$(left) bash docs/measurements/codegen-flags-2026-12-06/call-flags.sh
PROMPTS=4096 BUDGET=$(left) bash docs/next/call-knock-merge.sh && mv $OUT/knock.tgz $OUT/knock-4096.tgz
echo "pair $(( $(date +%s) - t0 )) s"
