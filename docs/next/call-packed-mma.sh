# Sweeps 100-101 and traces 121-122, prepared 2026-12-05 (tenth session, no device time left): the packed stage
# (docs/dropped/packed-stage.patch) and the tensor-core chunk (docs/dropped/chunk-tensor-cores.patch), alone and
# together, in three device calls: PART=a (~7 min: the GPU tests of both patches, the packed tree's sweep at 1,024),
# PART=b (~7 min: main's process at 1,024 and both processes at 4,096), PART=c (~4 min: the traces, kind by kind).
# On the laptop first: bash docs/next/prepare-lab.sh (lab/sk64c, lab/packed, lab/both, lab/mma).
# carry (7 paths, ~27 MB): ["lab/packed/src", "lab/packed/lib/libfleet_kernels.so", "lab/both/src", "lab/both/tests",
#   "lab/both/lib/libfleet_kernels.so", "lab/mma/lib/libfleet_kernels.so", "lab/sk64c/lib/libfleet_kernels.so"]
# The packed trees read 9-word stage tables (main's host 5): their libraries (packed, both) are timed in one process
# with lab/packed's host code; main's build and lab/mma (main's host code) in another, main's library twice (--same).
# Judge each change by its own kind's run in the traces and by the step against the same process's default; a
# build's code generation alone moves a step 2-5 % (part 19). With the tensor cores a head group re-reads the
# chunk's rows, while more chunks give the merge more partials: the plans below try both directions (at 1,024:
# the decode plan's 4 groups of 32 positions, 132 tasks; 1 group of 16, 66 tasks; 1 of 32, 33; 2 of 16, 132).
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX); R=$PWD
PK="env PYTHONPATH=$R/lab/packed/src FLEET_DECODE_KERNELS=$R/lab/packed/lib/libfleet_kernels.so"
MAIN="env PYTHONPATH=$R/src FLEET_DECODE_KERNELS=$R/lab/sk64c/lib/libfleet_kernels.so"
BOTH="--library both=$R/lab/both/lib/libfleet_kernels.so"
MMA="--library mma=$R/lab/mma/lib/libfleet_kernels.so"
lab() { local name=$1 env=$2; shift 2; $env timeout 170 python3 -m fleet_decode.kernels.lab --sweep "$@" \
  --out $T/$name.json 2>&1 | grep -v Warning; echo "$name $(( $(date +%s) - t0 )) s"; }  # lab NAME "$PK" ARGS...
case "${PART:-a}" in
a)
  env PYTHONPATH=$R/lab/both/src FLEET_DECODE_KERNELS=$R/lab/both/lib/libfleet_kernels.so timeout 240 python3 -m \
    pytest -q -x -p no:cacheprovider lab/both/tests/test_kernels_gpu.py lab/both/tests/test_megakernel_gpu.py \
    -k "kernels_gpu or step_matches or 32_tokens or deterministic or staged or ahead or packed" 2>&1 | tail -4
  echo "tests $(( $(date +%s) - t0 )) s"
  lab sweep100 "$PK" $BOTH --variants "stage_ahead=packed,stage_ahead=packed-early,default@both,\
stage_ahead=packed@both,stage_ahead=packed + attn_head_groups=1@both"
  ;;
b)
  lab sweep101 "$MAIN" --same $MMA --variants "default@mma,attn_head_groups=1@mma,attn_head_groups=1 + attn_chunk=32@mma,\
attn_head_groups=2 + attn_chunk=16@mma"
  lab sweep100-4096 "$PK" --prompt 4096 $BOTH --variants "stage_ahead=packed,default@both,stage_ahead=packed@both,\
stage_ahead=packed + attn_head_groups=1@both"
  lab sweep101-4096 "$MAIN" --same --prompt 4096 $MMA --variants "default@mma,attn_head_groups=1 + attn_chunk=32@mma"
  ;;
c)
  # the packed tree's builds (packed, both) under its default and the packed policy, one process, kind by kind
  # (runs, weights resident before ready, the chain to the top-k); then main's build against lab/mma
  $PK timeout 150 python3 -m fleet_decode.kernels.trace --library packed=$R/lab/packed/lib/libfleet_kernels.so $BOTH \
    --variant default --variant "stage_ahead=packed" --out $T/trace121.json 2>&1 | grep -v Warning \
    | sed -n '/^per kind: run us/,$p'
  echo "trace121 $(( $(date +%s) - t0 )) s"
  $MAIN timeout 90 python3 -m fleet_decode.kernels.trace --library main=$R/lab/sk64c/lib/libfleet_kernels.so $MMA \
    --out $T/trace122.json 2>&1 | grep -v Warning | sed -n '/^per kind: run us/,$p'
  echo "trace122 $(( $(date +%s) - t0 )) s"
  ;;
esac
tar czf $OUT/next-${PART:-a}.tgz -C $T .
