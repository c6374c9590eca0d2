# The GPU-marked tests on the H200 (2026-12-04, eighth session; sixth call), at the commit named in the log's
# name, on main's kernels as built on the laptop (lab/sk64c from hip/). Carry .whl and the library.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONPATH=$PWD/src:$PYTHONPATH PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s)
timeout 480 python3 -m pytest -q -m gpu -p no:cacheprovider -rs tests > $OUT/pytest-gpu.log 2>&1
echo "rc=$? $(( $(date +%s) - t0 )) s"; tail -15 $OUT/pytest-gpu.log
