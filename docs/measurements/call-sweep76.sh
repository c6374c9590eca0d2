# As run for sweep 76 (2026-12-03, fourth session; third call). Plan.gate_up_all_workers (the routing-free
# gate/up stage cut over all 132 workers: 128 tiles of 88 rows, the routed tiles listed ahead of the shared
# down tiles) on main's kernels and on the one-warp top-k (lab/topk), with two samples of each default, and
# traced. Carry lab/main and lab/topk as for sweep 75.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
export FLEET_DECODE_KERNELS=$PWD/lab/topk/lib/libfleet_kernels.so
V="default@main,host_views=true@main,default@topk,host_views=true@topk"
V="$V,gate_up_all_workers=true@main,gate_up_all_workers=true + host_views=true@main"
V="$V,gate_up_all_workers=true@topk,gate_up_all_workers=true + host_views=true@topk"
V="$V,gate_up_all_workers=true + down_fit=true@topk,gate_up_all_workers=true + worker_stride=89@topk"
V="$V,gate_up_all_workers=true + worker_stride=127@topk,gate_up_all_workers=true + worker_stride=1@topk"
V="$V,gate_up_all_workers=true + shared_parts=2@topk"
timeout 200 python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L topk) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
timeout 60 python3 -m fleet_decode.kernels.trace --variant "gate_up_all_workers=true" $(L topk) --out $T/trace-gate-up-all-workers.json --raw $T/trace-gate-up-all-workers.npz 2>&1 | grep -v Warning | grep -v " us  " | tail -40
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
