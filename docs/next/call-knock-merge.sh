# Eighteenth session (2026-12-07), prepared, not yet run: the merge-in-o_proj knockout (docs/next/README.md item
# 10; docs/next/merge-in-o-proj-knockout.patch has the numbers' meaning). Carry lab/main/lib/libfleet_kernels.so
# (main's hip/) and lab/knock/lib/libfleet_kernels.so (the patch's hip/), both built on the laptop. One sweep a
# prompt length, one process each: main's library (default, default@same) and the patched one with the knockout
# off (default@knock) and on (knock_merge_parts=4/16/64@knock). Fits an H100. BUDGET: seconds for the whole call;
# PROMPTS: the prompt lengths, in order (default "1024 4096").
#   bash docs/next/call-knock-merge.sh    (from the repository root)
. docs/next/patched-src.sh docs/next/merge-in-o-proj-knockout.patch
vars="default,default@knock,knock_merge_parts=4@knock,knock_merge_parts=16@knock,knock_merge_parts=64@knock"
for prompt in ${PROMPTS:-1024 4096}; do
  left=$(( ${BUDGET:-585} - ($(date +%s) - t0) )); [ $left -gt 60 ] || break
  FLEET_DECODE_KERNELS=$MAIN timeout $left python3 -m fleet_decode.kernels.lab --sweep --same --prompt $prompt \
    --library knock=$L/knock/lib/libfleet_kernels.so --variants "$vars" --out $T/knock-$prompt.json 2>&1 \
    | grep -v Warning | tail -10
  echo "knock-$prompt $(( $(date +%s) - t0 )) s"
done
tar czf $OUT/knock.tgz -C $T $(cd $T && ls knock-*.json 2>/dev/null)
