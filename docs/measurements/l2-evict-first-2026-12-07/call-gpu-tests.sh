# Twenty-first session: the GPU-marked tests at main's commit after part 24 landed, on main's kernels as built on the
# laptop (lab/main24 from hip/ at b2b17d3; its SASS is lab/ef2's, instruction for instruction), on whichever GPU
# is lent (the log's first line names it). Carry .whl and lab/main24/lib/libfleet_kernels.so. BUDGET (default 300).
#   bash docs/measurements/l2-evict-first-2026-12-07/call-gpu-tests.sh    (from the repository root)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONPATH=$PWD/src:$PYTHONPATH PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/main24/lib/libfleet_kernels.so
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/pytest-gpu.log
timeout $(( ${BUDGET:-300} - 10 )) python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests >> $OUT/pytest-gpu.log 2>&1
echo "rc=$? $(( $(date +%s) - t0 )) s"; tail -15 $OUT/pytest-gpu.log
