# As run for sweep 80 and the session's pipeline run (2026-12-03, fifth session; third call). The new default
# (split-K slices, 5fc2aab: lab/sk64c is its hip/) against the routing-free tiling on main's old kernels
# (lab/main) and on the new ones, in one process; then the pipeline on 5fc2aab (`snakemake report --config
# 'targets=[h200]'`). Carry .whl, DEPLOY_MANIFEST.json and the two libraries.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@sk64c,moe_tiles=routing-free@main,moe_tiles=routing-free@sk64c,split_k_shared_tiles=0@sk64c"
PYTHONPATH=$PWD/src:$PYTHONPATH FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so timeout 70 \
  python3 -m fleet_decode.kernels.lab --sweep $(L main) $(L sk64c) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
cp $T/sweep.json $OUT/sweep80.json
timeout $(( 590 - ($(date +%s) - t0) )) snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -5 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "all $(( $(date +%s) - t0 )) s"
