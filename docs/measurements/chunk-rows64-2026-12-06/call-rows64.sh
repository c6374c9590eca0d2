# Prepared in the fourteenth session (2026-12-06), NOT run yet: the tensor-core entry with the rows form for every chunk
# (docs/next/chunk-rows-64.patch, lab/rows64) against main's build (lab/main). Prepare on the laptop:
#   for v in main:- rows64:docs/next/chunk-rows-64.patch; do
#     n=${v%%:*} p=${v#*:}; rm -rf lab/$n && mkdir -p lab/$n && cp -r hip lab/$n/ && { [ $p = - ] || (cd lab/$n && patch -p1 -s < ../../$p); }
#     python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/$n/hip --out lab/$n/lib --jobs 2; done
# and carry lab/rows64/lib/libfleet_kernels.so and lab/main/lib/libfleet_kernels.so. ~3 minutes.
# Steps: the chunk's M1 check at 64-position chunks (two segments; both forms, 1, 2 and 16 head blocks, fp32 and bf16
# activations), M1's per-kind test (32-position chunks) and the two entries' decode test; then one sweep a length,
# both libraries in one process: 4,096 (64-position chunks, 8 heads: the padded form on main), 2,176 (48 positions,
# 8 heads), 1,024 (the tensor cores forced, 32 positions and 4 heads).
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
R64=$PWD/lab/rows64/lib/libfleet_kernels.so MAIN=$PWD/lab/main/lib/libfleet_kernels.so
nvidia-smi --query-gpu=name --format=csv,noheader
FLEET_DECODE_KERNELS=$R64 timeout 60 python3 -c "
import torch
from fleet_decode.kernels.checks import check_all
from fleet_decode.kernels.checks.harness import Shapes
r = check_all(seed=3, shapes=Shapes(chunk_len=64), kinds=['ATTN_CHUNK'], activations=(torch.float32, torch.bfloat16))
for k, v in r.items(): print(k, 'PASS' if v['passed'] else 'FAIL', v['max_rel'], v['shape'], v['note'])
" 2>&1 | grep -v Warning
FLEET_DECODE_KERNELS=$R64 timeout 100 python3 -m pytest -q -x -p no:cacheprovider \
  "tests/test_kernels_gpu.py::test_every_task_kernel_matches_its_reference" \
  "tests/test_megakernel_gpu.py::test_the_tensor_core_chunk_decodes_as_the_plain_one" 2>&1 | tail -2
echo "checks $(( $(date +%s) - t0 )) s"
sweep() {  # prompt, variants
  FLEET_DECODE_KERNELS=$R64 timeout 150 python3 -m fleet_decode.kernels.lab --sweep --prompt $1 --library main=$MAIN \
    --variants "$2" --out $T/sweep110-$1.json 2>&1 | grep -v Warning | tail -6
  echo "sweep110-$1 $(( $(date +%s) - t0 )) s"
}
sweep 4096 "default,chunk_form=plain,default@main,chunk_form=plain@main"
sweep 2176 "default,default@main"
sweep 1024 "default,chunk_form=tensor-cores,default@main,chunk_form=tensor-cores@main"
tar czf $OUT/rows64.tgz -C $T .
