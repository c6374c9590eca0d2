# As run for sweep 78 (2026-12-03, fifth session; first call). The split-K expert tilings re-timed and traced
# on today's kernels (last timed in part 9), with lab/sk64 (main's hip/ with docs/next/split-k-down-through-the-stage.patch:
# a slice's down rows through the stage in 128 KB chunks, so that 64-row slices, one routed slice a worker,
# need no register in flight for them); a raw trace of the default for window/window_split.py; the
# split-K GPU tests on lab/sk64. Before it, on the laptop: build lab/main (main's hip/) and lab/sk64; carry both.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@main,default@sk64,moe split-k@main,moe split-k@sk64,moe split-k + split_k_rows=64@sk64"
V="$V,moe split-k-routed@main,moe split-k-routed rows 64@sk64,moe split-k + split_k_rows=64 + split_k_shared_tiles=66@sk64"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L sk64) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 90 python3 -m fleet_decode.kernels.trace $(L main) --out $T/trace.json --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -30
timeout 60 python3 docs/measurements/window/window_split.py $T/trace-main.npz $T/trace-main.json --layer 10 | head -40
for v in "moe split-k + split_k_rows=64" "moe split-k-routed rows 64"; do
  n=$(echo "$v" | tr -d ' +=' )
  timeout 80 python3 -m fleet_decode.kernels.trace --variant "$v" $(L sk64) --out $T/trace-$n.json --raw $T/trace-$n.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -30
done
echo "traces $(( $(date +%s) - t0 )) s"
FLEET_DECODE_KERNELS=$PWD/lab/sk64/lib/libfleet_kernels.so timeout 120 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py -k "split" 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
