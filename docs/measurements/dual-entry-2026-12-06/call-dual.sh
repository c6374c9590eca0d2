# Thirteenth session (2026-12-06): the megakernel built with two entries, fd_megakernel<false> (the plain chunk,
# SASS identical to main's fd_megakernel) and fd_megakernel<true> (the padded tensor-core chunk, SASS identical to
# lab/mma2's), the host picking one per launch (Tuning.chunk_form). Carry lab/dual/lib/libfleet_kernels.so, built
# on the laptop from this tree's hip/ (python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/dual/hip
# --out lab/dual/lib). Steps: the per-kind GPU checks (both chunk forms) and the two forms' decode compared; then
# one sweep a context length, each timing the forms side by side in one process, to place the crossover.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX); DUAL=$PWD/lab/dual/lib/libfleet_kernels.so
nvidia-smi --query-gpu=name --format=csv,noheader
FLEET_DECODE_KERNELS=$DUAL timeout 200 python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels_gpu.py \
  "tests/test_megakernel_gpu.py::test_the_tensor_core_chunk_decodes_as_the_plain_one" 2>&1 | tail -3
echo "tests $(( $(date +%s) - t0 )) s"
for P in ${LENGTHS:-2048 3072 1536 4096}; do
  FLEET_DECODE_KERNELS=$DUAL timeout 110 python3 -m fleet_decode.kernels.lab --sweep --prompt $P \
    --variants "chunk_form=plain,chunk_form=tensor-cores" --out $T/sweep106-$P.json 2>&1 | grep -v Warning | tail -6
  echo "sweep106-$P $(( $(date +%s) - t0 )) s"
done
tar czf $OUT/dual.tgz -C $T .
