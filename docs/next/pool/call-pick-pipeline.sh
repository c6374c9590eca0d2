# The pipeline on the warm machine right after docs/next/pool/call-pool.sh, on the default that docs/next/pool/pick.py
# picks from that call's sweep (kept in lab/pool-out): main's tree as carried, or a candidate's (lab/cands/NAME:
# plan.patch, the one-commit change of decode_plan's constants on top of main, and the DEPLOY_MANIFEST.json of that
# commit), unpacked beside it in /tmp/alt, then docs/next/pipeline/call-pipeline.sh there. The evidence names the
# commit it ran (main's or the candidate's).
# Before the call, on the laptop: commit, then `bash docs/next/pool/prepare.sh` (the candidates, then main's manifest);
# carry .whl, DEPLOY_MANIFEST.json and lab/cands.
#   TARGET=h100 bash docs/next/pool/call-pick-pipeline.sh    (from the repository root)
export PYTHONUNBUFFERED=1
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
TARGET=${TARGET:-h100} WHEELS=$root/.whl bash $root/docs/next/pipeline/call-pipeline.sh
