# Phase marks at 4,096 positions, and the GPU tests (2026-12-04, ninth session). lab/phases: 080f87d's hip/ with
# docs/measurements/phases/phase-marks-16a9556.patch, built in the eighth session (hip/'s kernel code is unchanged
# since; the chunk's marks: p0 q loaded, p1 scores, p2 softmax, p3 weighted sum). Where a chunk's 14-15 us go at
# 4,096 positions (5.7 at 1,024; sweeps 94 and 96 halved its weighted sum's row batches and it ran 1 us shorter).
# Then the GPU-marked tests on main's kernels as built on the laptop (lab/sk64c from hip/ at the commit in the
# log's name). Carry .whl and both libraries.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONPATH=$PWD/src:$PYTHONPATH PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s)
for P in 4096 1024; do
  PHASE_PROMPT=$P timeout 100 python3 docs/measurements/phases/phase.py $PWD/lab/phases/lib/libfleet_kernels.so 2>&1 \
    | grep -v Warning | tee $OUT/phases3-$P.txt
  echo "phases $P $(( $(date +%s) - t0 )) s"
done
timeout 300 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests > $OUT/pytest-gpu.log 2>&1
echo "rc=$? $(( $(date +%s) - t0 )) s"; tail -5 $OUT/pytest-gpu.log
