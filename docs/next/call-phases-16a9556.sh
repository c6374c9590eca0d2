# Ready to run (written 2026-12-03, fourth session): the phases of main's tasks with the down tiles and the
# one-warp top-k marked, and a raw trace of the default for docs/measurements/window/window_split.py. On the
# laptop first:
#   mkdir -p lab/phase2 && cp -r hip lab/phase2/ && (cd lab/phase2 && patch -p1 < ../../docs/measurements/phases/phase-marks-16a9556.patch)
#   PYTHONPATH=src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/phase2/hip --out lab/phase2/lib --jobs 2
#   (and main's own build into lab/main); carry lab/phase2/lib/libfleet_kernels.so and lab/main/lib/libfleet_kernels.so.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
timeout 120 python3 docs/measurements/phases/phase.py lab/phase2/lib/libfleet_kernels.so 2>&1 | grep -v Warning | tee $T/phase.txt
timeout 90 python3 -m fleet_decode.kernels.trace --library main=$PWD/lab/main/lib/libfleet_kernels.so \
  --out $T/trace.json --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -30
timeout 60 python3 docs/measurements/window/window_split.py $T/trace-main.npz $T/trace-main.json --layer 10 | head -60
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
