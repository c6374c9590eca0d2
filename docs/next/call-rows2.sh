# Prepared in the fourteenth session (2026-12-06), NOT run (the device budget ran out); after call-rows.sh and trace 122 (the rows form's chunk 6.75 us against the padded
# form's 9.90, the merge after it 5.90 against 4.89): lab/rows2 = lab/rows with the weighted sum's products written
# to part_o through a warp's 16x16 in shared memory, in whole 16-byte pieces (lab/rows wrote 4-byte pieces). The
# chunk check with the rows2 build, then one sweep at 1,024 with the three libraries. Prepare on the laptop:
#   for v in main:- rows:docs/dropped/chunk-tensor-cores-rows-in-shared-memory.patch rows2:docs/next/chunk-rows-coalesced-output.patch; do
#     n=${v%%:*} p=${v#*:}; rm -rf lab/$n && mkdir -p lab/$n && cp -r hip lab/$n/ && { [ $p = - ] || (cd lab/$n && patch -p1 -s < ../../$p); }
#     python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/$n/hip --out lab/$n/lib --jobs 2; done
# and carry lab/{rows2,rows,main}/lib/libfleet_kernels.so.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
R2=$PWD/lab/rows2/lib/libfleet_kernels.so ROWS=$PWD/lab/rows/lib/libfleet_kernels.so MAIN=$PWD/lab/main/lib/libfleet_kernels.so
nvidia-smi --query-gpu=name --format=csv,noheader
FLEET_DECODE_KERNELS=$R2 timeout 60 python3 -m pytest -q -x -p no:cacheprovider \
  "tests/test_kernels_gpu.py::test_every_task_kernel_matches_its_reference" 2>&1 | tail -2
FLEET_DECODE_KERNELS=$R2 timeout 100 python3 -m fleet_decode.kernels.lab --sweep --prompt 1024 --library rows=$ROWS \
  --library main=$MAIN --out $T/sweep109-1024.json \
  --variants "default,chunk_form=tensor-cores,chunk_form=tensor-cores@rows,default@main" 2>&1 | grep -v Warning | tail -6
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/rows2.tgz -C $T .
