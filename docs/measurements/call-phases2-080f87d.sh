# Phase marks on the 080f87d defaults (2026-12-04, eighth session; ninth call): lab/phases2 is main's hip/ with
# docs/measurements/phases/phase-marks-16a9556.patch (it applies to 080f87d's hip/ unchanged), built on the
# laptop, and the router's norm inlined with marks of its own (p2: thread 0's x loads, p3: the block sum, p4: x
# re-read and the norm weight read, p0: the barrier). Per kind and phase, mean microseconds of thread 0 between marks (the marks' atomics cost time
# themselves: compare within the run). Carry the library.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s)
timeout 150 python3 docs/measurements/phases/phase.py $PWD/lab/phases2/lib/libfleet_kernels.so 2>&1 | grep -v Warning \
  | tee $OUT/phases2.txt
echo "phases $(( $(date +%s) - t0 )) s"
