# As run for sweep 79 (2026-12-03, fifth session; second call). Split-K slices of 64 rows (sweep 78: at par
# with the default, the sum stage 3.5 us a layer on the path) with the sum's column groups added by warp
# shuffles (lab/sk64b: lab/sk64 with docs/next/sum-partials-by-shuffles.patch), the shared slices cut
# otherwise, tails; a raw trace; the split-K GPU tests on lab/sk64b. Before it, on the laptop: build lab/main,
# lab/sk64 and lab/sk64b; carry the three libraries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
S="moe split-k + split_k_rows=64"
V="default@main,$S@sk64,$S@sk64b,$S + split_k_shared_tiles=176@sk64b,$S + split_k_shared_tiles=88@sk64b"
V="$V,tails + $S@sk64b,$S + split_k_shared_tiles=123@sk64b,default@sk64b"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L sk64) $(L sk64b) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 80 python3 -m fleet_decode.kernels.trace --variant "$S" $(L sk64b) --out $T/trace-sk64b.json --raw $T/trace-sk64b.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -22
timeout 60 python3 docs/measurements/window/window_split.py $T/trace-sk64b-sk64b.npz $T/trace-sk64b-sk64b.json --layer 10 > $T/window-sk64b.txt 2>&1; head -1 $T/window-sk64b.txt
FLEET_DECODE_KERNELS=$PWD/lab/sk64b/lib/libfleet_kernels.so timeout 100 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py -k "split" 2>&1 | tail -3
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
