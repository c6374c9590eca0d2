# Nsight Compute's PC sampling on one megakernel launch (2026-12-04, ninth session): per SASS instruction, the
# warps' stall samples, to add up per task kind on the laptop (the instruction addresses of the carried
# library's megakernel.sm_90a.cubin, nvdisasm -gi: docs/measurements/kind_stalls.py). call-ncu.sh gave the
# launch's warp states: 9.4 cycles a warp per issued instruction, 0.33 of them "no instruction".
# Main's kernels as built on the laptop (lab/sk64c). Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s)
timeout 200 ncu --kernel-name regex:fd_megakernel --launch-count 1 --section SourceCounters --section WarpStateStats \
  -o $OUT/mk -f python3 docs/measurements/ncu_launch.py 1024 8 > $OUT/ncu2.txt 2>&1
echo "ncu rc=$? $(( $(date +%s) - t0 )) s"; tail -3 $OUT/ncu2.txt
timeout 120 ncu --import $OUT/mk.ncu-rep --page source --csv --print-source sass > $OUT/source-sass.csv 2> $OUT/import.err
echo "import rc=$? $(( $(date +%s) - t0 )) s"; head -c 600 $OUT/source-sass.csv; echo; wc -c $OUT/source-sass.csv; tail -3 $OUT/import.err
gzip -f $OUT/source-sass.csv; ls -la $OUT
