# Sweep 100 and trace 121, prepared 2026-12-05 (tenth session, no device time left), for the next session: the packed
# stage (docs/next/packed-stage.patch: tiles side by side in the stage on four mbarriers, planned on the host).
# On the laptop first (~2 min):
#   rm -rf lab/packed && mkdir -p lab/packed && cp -r src hip tests pyproject.toml lab/packed/ \
#     && (cd lab/packed && patch -p1 -s < ../../docs/next/packed-stage.patch)
#   PYTHONPATH=lab/packed/src python -m fleet_decode.kernels.build --arch sm_90a --hip-dir lab/packed/hip \
#     --out lab/packed/lib --jobs 2
#   (and main's build in lab/sk64c/lib as the setup notes say)
# carry: ["lab/packed", "lab/sk64c/lib"]. The patched host code reads 9-word stage tables, main's 5: a library is
# timed with its own tree's Python, so the planner is judged inside the patched build (default = successor vs
# packed vs packed-early, one process) and the patch's code generation by main's build in a process of its own.
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
P=$PWD/lab/packed
PK="env PYTHONPATH=$P/src FLEET_DECODE_KERNELS=$P/lib/libfleet_kernels.so"
MAIN="env PYTHONPATH=$PWD/src FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so"
VARIANTS="stage_ahead=packed,stage_ahead=packed-early"
(cd $P && $PK timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_megakernel_gpu.py \
  -k "staged or ahead or packed" 2>&1 | tail -4)
echo "tests $(( $(date +%s) - t0 )) s"
$PK timeout 120 python3 -m fleet_decode.kernels.lab --sweep --variants "$VARIANTS" --out $T/sweep100.json 2>&1 \
  | grep -v Warning
echo "sweep100 $(( $(date +%s) - t0 )) s"
$MAIN timeout 80 python3 -m fleet_decode.kernels.lab --sweep --same --variants "default@same" --out $T/sweep100-main.json \
  2>&1 | grep -v Warning
echo "sweep100-main $(( $(date +%s) - t0 )) s"
for v in default "stage_ahead=packed"; do
  $PK timeout 60 python3 -m fleet_decode.kernels.trace $( [ "$v" = default ] || echo --variant "$v" ) \
    --out $T/trace121-${v#stage_ahead=}.json 2>&1 | grep -v Warning | grep -i -A1 "MoE layer:"
done
echo "trace121 $(( $(date +%s) - t0 )) s"
$PK timeout 120 python3 -m fleet_decode.kernels.lab --sweep --prompt 4096 --variants "$VARIANTS" \
  --out $T/sweep100-4096.json 2>&1 | grep -v Warning
echo "sweep100-4096 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
