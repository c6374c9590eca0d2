# Fourteenth session (2026-12-06): the tensor-core chunk's "rows" form (lab/rows: hip/tasks/attention_chunk.cu's
# fd_attention_chunk_rows, chunks of up to 32 positions: the rows copied once into shared memory by cp.async, both
# products' operands from there by ldmatrix, raw m16n8k16 products with 8 heads a product's columns), against main's
# build (lab/main, this tree's hip/ unchanged; its plain entry's SASS is lab/rows' instruction for instruction).
# lab/rows is hip/ with docs/dropped/chunk-tensor-cores-rows-in-shared-memory.patch applied (patch -p1).
# Carry lab/rows/lib/libfleet_kernels.so and lab/main/lib/libfleet_kernels.so, built on the laptop
# (python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/NAME/hip --out lab/NAME/lib).
# Steps: M1's per-kind checks with the rows build (the chunk in both forms, 1, 2 and 16 head blocks) and the two
# entries' decode compared; then one sweep a length, both libraries in one process.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
ROWS=$PWD/lab/rows/lib/libfleet_kernels.so MAIN=$PWD/lab/main/lib/libfleet_kernels.so
nvidia-smi --query-gpu=name --format=csv,noheader
FLEET_DECODE_KERNELS=$ROWS timeout 200 python3 -m pytest -q -x -p no:cacheprovider \
  "tests/test_kernels_gpu.py::test_every_task_kernel_matches_its_reference" \
  "tests/test_megakernel_gpu.py::test_the_tensor_core_chunk_decodes_as_the_plain_one" 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
sweep() {  # prompt, variants
  FLEET_DECODE_KERNELS=$ROWS timeout ${3:-170} python3 -m fleet_decode.kernels.lab --sweep --prompt $1 \
    --library main=$MAIN --variants "$2" --out $T/sweep108-$1.json 2>&1 | grep -v Warning | tail -9
  echo "sweep108-$1 $(( $(date +%s) - t0 )) s"
}
sweep 1024 "default,chunk_form=tensor-cores,chunk_form=tensor-cores + attn_head_groups=2,chunk_form=tensor-cores + attn_head_groups=1,stage_ahead=next-layer,default@main,chunk_form=tensor-cores@main"
sweep 4096 "default,attn_head_groups=1,default@main,attn_head_groups=1@main"
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/rows.tgz -C $T .
