# Sweep 88 and the session's pipeline run (2026-12-04, eighth session; third call). The new decode defaults
# (row_align 4, 8 absorb parts, dense split-K) on main's kernels (lab/sk64c, built from hip/ on the laptop)
# against the same on lab/exp: main's hip/ with the attention chunk's latent rows kept in shared memory for its
# weighted sum (docs/next/attention-chunk-rows-in-shared-memory.patch); then the pipeline on the committed tree
# (`snakemake report --config 'targets=[h200]'`). Carry .whl, DEPLOY_MANIFEST.json and the two libraries.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@exp,attn_head_groups=2 + attn_chunk=16@exp,attn_head_groups=2 + attn_chunk=16,default@exp"
PYTHONPATH=$PWD/src:$PYTHONPATH FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so timeout 70 \
  python3 -m fleet_decode.kernels.lab --sweep $(L exp) --variants "$V" --out $T/sweep.json 2>&1 | grep -v Warning
echo "sweep $(( $(date +%s) - t0 )) s"
cp $T/sweep.json $OUT/sweep88.json
timeout $(( 590 - ($(date +%s) - t0) )) snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -5 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "all $(( $(date +%s) - t0 )) s"
