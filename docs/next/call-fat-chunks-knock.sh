# Twentieth session (2026-12-07): the merge-in-o_proj design's chain without the one part not yet built (W_UV in the
# chunk). On the knockout's library (docs/next/merge-in-o-proj-knockout.patch: o_proj reads N dummy partials and no
# merge runs), the chunks cut as that design would cut them at 1,024 positions: 64 positions a chunk (17 chunks a
# head, so N = 16 is what o_proj would read) in 4, 8 or 16 head groups (68, 136 or 272 tasks; one head a task is the
# form that could apply its head's W_UV). A variant here that does not beat `default` leaves no room for the W_UV
# work; one that does bounds what that work may cost. The second sweep adds that work's price: lab/knockuv
# (docs/next/knock-chunk-uv-proxy.patch) runs a W_UV-sized GEMV a head in every 64-position chunk. Carry
# lab/{main,knock,knockuv}/lib/libfleet_kernels.so (built as call-knock-merge.sh and the proxy patch say); fits an
# H100. BUDGET: seconds (default 200).
#   bash docs/next/call-fat-chunks-knock.sh    (from the repository root)
. docs/next/patched-src.sh docs/next/merge-in-o-proj-knockout.patch
fat="attn_chunk=64 + attn_head_groups"
sweep() {  # name library variants: one process, main's library and one other (three do not fit an H100's 80 GB)
  left=$(( ${BUDGET:-200} - ($(date +%s) - t0) - 5 )); [ $left -gt 40 ] || return
  FLEET_DECODE_KERNELS=$MAIN timeout $left python3 -m fleet_decode.kernels.lab --sweep --prompt 1024 \
    --library $2=$L/$2/lib/libfleet_kernels.so --variants "$3" --out $OUT/$1.json 2>&1 | grep -v Warning | tail -9
  echo "$1 $(( $(date +%s) - t0 )) s"
}
vars="default,default@knock,knock_merge_parts=16@knock,$fat=4@knock"
for g in 4 8 16; do vars="$vars,knock_merge_parts=16 + $fat=$g@knock"; done
sweep sweep115-1024 knock "$vars"
vars="default,default@knockuv"
for g in 4 8 16; do vars="$vars,knock_merge_parts=16 + $fat=$g@knockuv"; done
sweep sweep116-1024 knockuv "$vars"
