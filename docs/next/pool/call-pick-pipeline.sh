# The pipeline on the warm machine right after docs/next/pool/call-pool.sh, on the default that docs/next/pool/pick.py
# picks from that call's sweep (kept in lab/pool-out): main's tree as carried, or a candidate's (lab/cands/NAME:
# plan.patch, the one-commit change of decode_plan's constants on top of main, and the DEPLOY_MANIFEST.json of that
# commit), unpacked beside it in /tmp/alt. The evidence names the commit it ran (main's or the candidate's).
# Before the call, on the laptop: commit, then `bash docs/next/pool/make-candidates.sh` (candidates and main's
# manifest, in that order); carry .whl, DEPLOY_MANIFEST.json and lab/cands.
#   TARGET=h100 bash docs/next/pool/call-pick-pipeline.sh    (from the repository root)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
TARGET=${TARGET:-h100}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
root=$PWD
pick=$(python3 docs/next/pool/pick.py lab/pool-out lab/cands 2> $OUT/pick.txt); cat $OUT/pick.txt
[ -n "$pick" ] && [ -d "lab/cands/$pick" ] || pick=default
echo "picked: $pick" | tee -a $OUT/pick.txt
if [ "$pick" != default ]; then
  rm -rf /tmp/alt && mkdir -p /tmp/alt
  tar --exclude=./.git --exclude=./.whl --exclude=./lab --exclude=./DEPLOY_MANIFEST.json -cf - . | tar -xf - -C /tmp/alt
  if (cd /tmp/alt && patch -p1 -s < $root/lab/cands/$pick/plan.patch && cp $root/lab/cands/$pick/DEPLOY_MANIFEST.json .); then
    cd /tmp/alt
  else
    echo "the candidate's patch did not apply: the pipeline runs main's tree" | tee -a $OUT/pick.txt
  fi
fi
echo "pipeline in $PWD"
timeout ${PIPELINE_S:-540} snakemake report --config "targets=[$TARGET]" > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -12 $OUT/snakemake.log
tar czf $OUT/$TARGET.tgz results/$TARGET
echo "pipeline $(( $(date +%s) - t0 )) s"
