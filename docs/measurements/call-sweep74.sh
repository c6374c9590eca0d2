# As run for sweep 74 (2026-12-03, fourth session; first call). # The call that times docs/next/l2-first-pass.patch and docs/next/poller.patch, each alone and both (on the
# H200, from the repository root). Before it, on the laptop: build main's kernels into lab/main and the
# patched ones into lab/l2pre, lab/poller and lab/both, e.g.
#   mkdir -p lab/l2pre && cp -r hip lab/l2pre/ && (cd lab/l2pre && patch -p1 < ../../docs/next/l2-first-pass.patch)
#   PYTHONPATH=src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/l2pre/hip --out lab/l2pre/lib --jobs 2
# (lab/both: apply both patches), and carry lab/{main,l2pre,poller,both}/lib/libfleet_kernels.so; the phase
# marks (docs/measurements/phases/phase-marks-9472313.patch) built into lab/phase and carried too.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); mkdir -p /tmp/t; rm -f /tmp/t/*
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/both/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L l2pre) $(L poller) $(L both) \
  --variants "default@main,default@l2pre,default@poller,default@both,host_views=true@main,host_views=true@both" \
  --out /tmp/t/sweep.json 2>&1 | grep -v Warning
timeout 100 python3 docs/measurements/phases/phase.py lab/phase/lib/libfleet_kernels.so 2>&1 | grep -v Warning | tee /tmp/t/phase.txt
timeout 120 python3 -m fleet_decode.kernels.trace $(L main) $(L l2pre) $(L poller) --out /tmp/t/trace.json 2>&1 | grep -v Warning | grep -v " us  " | tail -80
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C /tmp/t .
