# Twelfth session (2026-12-05, an H100): the tensor-core chunk with its shared-memory rows padded (lab/mma2: q's
# parts 584 bf16 a row, the probabilities 72; unpadded, the 16 rows of every A fragment sat in one bank group),
# against main's build and the unpadded lab/mma. Carry lab/sk64c, lab/mma and lab/mma2's libraries.
# Steps: mma2's per-kind GPU checks; a sweep at 1,024 (main, mma, mma2, one process); traces at 1,024 and 4,096
# (main vs mma2); then Nsight Compute's per-instruction stall samples of one launch at 4,096 on mma2.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX); R=$PWD
MAIN=$R/lab/sk64c/lib/libfleet_kernels.so MMA=$R/lab/mma/lib/libfleet_kernels.so MMA2=$R/lab/mma2/lib/libfleet_kernels.so
FLEET_DECODE_KERNELS=$MMA2 timeout 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_kernels_gpu.py 2>&1 | tail -3
echo "tests $(( $(date +%s) - t0 )) s"
FLEET_DECODE_KERNELS=$MAIN timeout 120 python3 -m fleet_decode.kernels.lab --sweep --library mma=$MMA \
  --library mma2=$MMA2 --variants "default@mma,default@mma2" --out $T/sweep102.json 2>&1 | grep -v Warning
echo "sweep102 $(( $(date +%s) - t0 )) s"
for P in 1024 4096; do
  FLEET_DECODE_KERNELS=$MAIN timeout 100 python3 -m fleet_decode.kernels.trace --prompt $P --library main=$MAIN \
    --library mma2=$MMA2 --out $T/trace123-$P.json 2>&1 | grep -v Warning | sed -n '/^per kind: run us/,$p' | head -32
  echo "trace123-$P $(( $(date +%s) - t0 )) s"
done
FLEET_DECODE_KERNELS=$MMA2 timeout 200 ncu --kernel-name regex:fd_megakernel --launch-count 1 --section SourceCounters \
  --section WarpStateStats -o $T/mk -f python3 docs/measurements/ncu_launch.py 4096 4 > $T/ncu.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - t0 )) s"; tail -2 $T/ncu.txt
timeout 100 ncu --import $T/mk.ncu-rep --page source --csv --print-source sass > $T/source-sass.csv 2> $T/import.err
echo "import rc=$? $(( $(date +%s) - t0 )) s"; gzip -f $T/source-sass.csv; rm -f $T/mk.ncu-rep
tar czf $OUT/mma2.tgz -C $T .
