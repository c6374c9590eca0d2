# Nsight Compute on one megakernel launch (2026-12-04, ninth session): warp stall reasons, above all
# "no instruction" (the instruction cache). The megakernel's SASS is 597 KB (38,224 instructions; per kind,
# nvdisasm -gi: the attention chunk's forms 146 KB, the merge by columns 46 KB, the slices 35 KB, the q-absorb
# 21 KB, the q/kv tiles 17 KB, the router 17 KB, the top-k 10 KB): a worker runs ~200 KB of it each layer.
# Main's kernels as built on the laptop (lab/sk64c). Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s)
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /usr/local/cuda*/nsight-compute*/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: ${NCU:-none}"; [ -n "$NCU" ] || { ls /usr/local/cuda/bin | tr '\n' ' '; exit 0; }
$NCU --version | tail -1
timeout 200 $NCU --kernel-name regex:fd_megakernel --launch-count 1 --section WarpStateStats --section SchedulerStats \
  --section InstructionStats --print-details all python3 docs/measurements/ncu_launch.py 1024 8 > $OUT/ncu-1024.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - t0 )) s"; grep -v "^==PROF==\|Warning" $OUT/ncu-1024.txt | tail -70
