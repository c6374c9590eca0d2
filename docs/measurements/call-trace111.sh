# Traces 111 and 112 and sweep 89 (2026-12-04, eighth session; fourth call): the decode defaults since 080f87d
# (row_align 4, 8 absorb parts, dense split-K) traced at 1,024 and 4,096 positions for docs/megakernel.md
# part 18's stage table, and the head groups re-timed at 4,096. main's kernels (lab/sk64c, built from hip/ on
# the laptop). Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
timeout 90 python3 -m fleet_decode.kernels.trace --variant default --out $T/trace111.json --raw $T/trace111.npz 2>&1 \
  | grep -v Warning | grep -v " us  " | tail -16
echo "trace111 $(( $(date +%s) - t0 )) s"
timeout 120 python3 -m fleet_decode.kernels.trace --prompt 4096 --variant default --out $T/trace112.json \
  --raw $T/trace112.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -16
echo "trace112 $(( $(date +%s) - t0 )) s"
V="default,attn_head_groups=1,attn_head_groups=4 + attn_chunk=64,attn_chunk=48,default"
timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 --variants "$V" --out $T/sweep89.json 2>&1 \
  | grep -v Warning
echo "sweep89 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
