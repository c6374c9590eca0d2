# Sweep 101 and trace 122, prepared 2026-12-05 (tenth session, no device time left), for the next session: the
# attention chunk on the tensor cores (docs/next/chunk-tensor-cores.patch: every head count in one form, 16x16x16
# bf16 products with q and the probabilities in hi + lo parts; the plain forms out of the sm_90a build: the
# megakernel's code 611,584 -> 505,216 bytes, 254 registers, no spills). Host code unchanged, so one process
# times main's build and the patched one side by side (--library). On the laptop first:
#   mkdir -p lab/mma && cp -r hip lab/mma/hip && (cd lab/mma && patch -p1 -s < ../../docs/next/chunk-tensor-cores.patch)
#   PYTHONPATH=src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/mma/hip --out lab/mma/lib --jobs 2
#   (and main's build in lab/sk64c/lib as the setup notes say)
# carry: ["lab/sk64c/lib/libfleet_kernels.so", "lab/mma/lib/libfleet_kernels.so"]
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
MAIN=$PWD/lab/sk64c/lib/libfleet_kernels.so MMA=$PWD/lab/mma/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
# 1. correctness on the patched build: M1 (every task kernel against torch, the chunk in 1, 2 and 16 head
#    groups) and the megakernel's decode against the reference
FLEET_DECODE_KERNELS=$MMA timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels_gpu.py \
  tests/test_megakernel_gpu.py -k "kernels_gpu or step_matches or 32_tokens or deterministic" 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
# 2. the step: main's build, main's again (--same), the patched build with the decode plan and with fatter chunks
export FLEET_DECODE_KERNELS=$MAIN
V1024="default@mma,attn_head_groups=2 + attn_chunk=16@mma,attn_head_groups=1 + attn_chunk=16@mma"
timeout 130 python3 -m fleet_decode.kernels.lab --sweep --same --library mma=$MMA --variants "$V1024" \
  --out $T/sweep101.json 2>&1 | grep -v Warning
echo "sweep101 $(( $(date +%s) - t0 )) s"
timeout 80 python3 -m fleet_decode.kernels.trace --library main=$MAIN --library mma=$MMA --out $T/trace122.json 2>&1 \
  | grep -v Warning | grep -i -A1 "MoE layer:\|ATTN_CHUNK"
echo "trace122 $(( $(date +%s) - t0 )) s"
V4096="default@mma,attn_head_groups=1 + attn_chunk=32@mma,attn_head_groups=1 + attn_chunk=64@mma"
timeout 130 python3 -m fleet_decode.kernels.lab --sweep --same --prompt 4096 --library mma=$MMA --variants "$V4096" \
  --out $T/sweep101-4096.json 2>&1 | grep -v Warning
echo "sweep101-4096 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
