# Thirteenth session (2026-12-06): the pipeline on the H200 (`snakemake report --config 'targets=[h200]'`, the
# deploy manifest written on the laptop first: python -m fleet_decode.pipeline.deploy; carry .whl and
# DEPLOY_MANIFEST.json), then, in the time left, the GPU test comparing the two chunk forms' decode on the
# library the pipeline built. Run it with no machine held, or after give_back: a call that names nvidia-h200 while an
# H100 is held runs on that H100 (fourteenth session), where M3 runs out of its 80 GB. Check the first line it prints.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH || exit
export PYTHONUNBUFFERED=1
t0=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 540 snakemake report --config 'targets=[h200]' > $OUT/snakemake.log 2>&1
echo "rc=$?"; tail -5 $OUT/snakemake.log
tar czf $OUT/h200.tgz results/h200
echo "pipeline $(( $(date +%s) - t0 )) s"
left=$(( 590 - ($(date +%s) - t0) ))  # the test loads the pipeline's build (build/kernels/sm_90a)
[ $left -gt 30 ] && PYTHONPATH=$PWD/src:/tmp/site timeout $left python3 -m pytest -q -x \
  -p no:cacheprovider "tests/test_megakernel_gpu.py::test_the_tensor_core_chunk_decodes_as_the_plain_one" 2>&1 | tail -3
echo "all $(( $(date +%s) - t0 )) s"
