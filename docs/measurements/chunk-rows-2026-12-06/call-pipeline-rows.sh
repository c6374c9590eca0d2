# Fourteenth session (2026-12-06): the pipeline on the H200 (`snakemake report --config 'targets=[h200]'`, the deploy
# manifest written on the laptop first; carry .whl and DEPLOY_MANIFEST.json), then, in the call's time left, the
# rows form's sweep at 1,024 positions (call-rows.sh's first sweep; carry lab/rows and lab/main's libraries too).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 520 snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -5 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "pipeline $(( $(date +%s) - t0 )) s"
left=$(( 585 - ($(date +%s) - t0) ))
ROWS=$PWD/lab/rows/lib/libfleet_kernels.so MAIN=$PWD/lab/main/lib/libfleet_kernels.so
[ $left -gt 60 ] && FLEET_DECODE_KERNELS=$ROWS PYTHONPATH=$PWD/src:/tmp/site timeout $left python3 -m fleet_decode.kernels.lab \
  --sweep --prompt 1024 --library main=$MAIN --out $T/sweep108-1024.json \
  --variants "default,chunk_form=tensor-cores,chunk_form=tensor-cores + attn_head_groups=2,default@main" 2>&1 | grep -v Warning | tail -7
tar czf $OUT/rows.tgz -C $T .
echo "all $(( $(date +%s) - t0 )) s"
