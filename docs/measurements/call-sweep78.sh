# As run for sweep 78 (2026-12-03, fifth session; first call). The down tiles' and the shuffle top-k's
# phases (lab/phase2: main's hip/ with docs/measurements/phases/phase-marks-16a9556.patch), a raw trace of
# the default for window/window_split.py, and the split-K expert tilings re-timed and traced on today's
# kernels (last timed in part 9). Before it, on the laptop: build lab/main (main's hip/) and lab/phase2; carry both.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
timeout 100 python3 docs/measurements/phases/phase.py lab/phase2/lib/libfleet_kernels.so 2>&1 | grep -v Warning | tee $T/phase.txt | tail -40
echo "phases $(( $(date +%s) - t0 )) s"
timeout 90 python3 -m fleet_decode.kernels.trace $(L main) --out $T/trace.json --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -30
timeout 60 python3 docs/measurements/window/window_split.py $T/trace-main.npz $T/trace-main.json --layer 10 | head -50
for v in "moe split-k-routed" "moe split-k-routed rows 64" "moe split-k"; do
  n=$(echo "$v" | tr ' ' '-')
  timeout 80 python3 -m fleet_decode.kernels.trace --variant "$v" $(L main) --out $T/trace-$n.json --raw $T/trace-$n.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -30
done
echo "traces $(( $(date +%s) - t0 )) s"
V="default@main,moe split-k-routed@main,moe split-k-routed rows 48@main,moe split-k-routed rows 64@main,moe split-k@main"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L main) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
