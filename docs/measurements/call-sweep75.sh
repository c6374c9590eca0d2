# As run for sweep 75 (2026-12-03, fourth session; second call). The top-k by one warp in shuffle rounds
# (lab/topk: main's hip/ with docs/next/topk-shuffles.patch), the shared experts' gate/up after the router
# (Plan.shared_after_router, host side only) in both tilings, and plan variants of the expert window
# re-timed on today's default; GPU tests on lab/topk; traces of the default, the top-k and the router
# edge. Before it, on the laptop: build lab/main (main's hip/) and lab/topk, and carry both libraries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/topk/lib/libfleet_kernels.so
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_megakernel_gpu.py tests/test_kernels_gpu.py 2>&1 | tail -4
V="default@main,host_views=true@main,default@topk,host_views=true@topk"
V="$V,shared_after_router=true@main,shared_after_router=true@topk"
V="$V,moe shared-first@main,moe shared-first + shared_after_router=true@main,moe shared-first + shared_after_router=true@topk"
V="$V,tails@topk,down_fit=true@main,shared_parts=2@main,shared_parts=2 + shared_after_router=true@main"
V="$V,down_split=2@main,task_overhead=16384@main,task_overhead=1024@main,absorb_parts=2@main,merge_lat_parts=2@main"
timeout 240 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L topk) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace $(L main) $(L topk) --out $T/trace.json --raw $T/trace.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -40
timeout 60 python3 -m fleet_decode.kernels.trace --variant "shared_after_router=true" $(L main) --out $T/trace-after-router.json 2>&1 | grep -v Warning | grep -v " us  " | tail -25
timeout 60 python3 -m fleet_decode.kernels.trace --variant "moe shared-first + shared_after_router=true" $(L main) --out $T/trace-shared-first-after-router.json 2>&1 | grep -v Warning | grep -v " us  " | tail -25
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
