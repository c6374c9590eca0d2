# As run for sweep 77 and the session's pipeline run (2026-12-03, fourth session; fifth call). Three refused
# starts left device time for one call: the sweep of docs/next/down-index-and-residual-early.patch (lab/downidx,
# lab/resid, lab/dr against main's kernels, lab/topk; two samples each, no tests, no traces), then the
# pipeline on main (`snakemake report --config 'targets=[h200]'`). Carry .whl, DEPLOY_MANIFEST.json and the
# four libraries.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V=""
for b in topk downidx resid dr; do V="$V,default@$b,host_views=true@$b"; done
PYTHONPATH=$PWD/src:$PYTHONPATH FLEET_DECODE_KERNELS=$PWD/lab/topk/lib/libfleet_kernels.so timeout 80 \
  python3 -m fleet_decode.kernels.lab --sweep $(L topk) $(L downidx) $(L resid) $(L dr) --variants "${V#,}" \
  --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
cp $T/sweep.json $OUT/sweep77.json
timeout $(( 585 - ($(date +%s) - t0) )) snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -5 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "all $(( $(date +%s) - t0 )) s"
