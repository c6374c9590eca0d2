# Twelfth session (2026-12-05, an H100): the padded tensor-core chunk (lab/mma2) at 4,096 positions under fatter plans:
# 16 heads a task in 32- and 64-position chunks, against main's build (one process). Carry lab/sk64c and lab/mma2's libraries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
T=$(mktemp -d /tmp/call.XXXXXX); R=$PWD
FLEET_DECODE_KERNELS=$R/lab/sk64c/lib/libfleet_kernels.so timeout 200 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 \
  --library mma2=$R/lab/mma2/lib/libfleet_kernels.so \
  --variants "default@mma2,attn_head_groups=1@mma2,attn_head_groups=1 + attn_chunk=64@mma2" --out $T/sweep104-4096.json 2>&1 | grep -v Warning
tar czf $OUT/mma2-plans.tgz -C $T .
