# Sixteenth session (2026-12-06): does nvcc's code generation, steered by flags alone, move the step? Part 19 found
# that two builds of one source differ by 2-5 %; this times main's hip/ built with extra nvcc flags (the same
# sources, built by build-flags.sh NAME "FLAGS" in this folder) against main's build, one process a sweep:
#   main: as the pipeline builds it; o2: -Xptxas -O2; o1: -Xptxas -O1; cg: -Xptxas -dlcm=cg;
#   xvec: --extra-device-vectorization; slim and noinl (twentieth session): patched hip/, see the sweeps below
# Carry lab/{main,o2,xvec,slim,noinl}/lib/libfleet_kernels.so (cg left out: nvcc 13 builds the very same library with
# -Xptxas -dlcm=cg as without it, sha256 2c2df700..., eighteenth session). Two sweeps at 1,024 (libraries in opposite orders), one
# at 4,096 (SHORT=1: the two at 1,024 only; BUDGET: seconds for the whole call). On an H100 (80 GB) a process holds
# main's library and one more: the rest of a sweep fails out of memory (twentieth session); there, time one library
# a process as docs/measurements/codegen-slim-2026-12-07/README.md (sweep 114) did.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L=$PWD/lab; MAIN=$L/main/lib/libfleet_kernels.so
nvidia-smi --query-gpu=name --format=csv,noheader
sweep() {  # name prompt libraries...
  name=$1 prompt=$2; shift 2
  libs=() vars=default
  for n in "$@"; do libs+=(--library $n=$L/$n/lib/libfleet_kernels.so); vars="$vars,default@$n"; done
  vars="$vars${EXTRA:+,$EXTRA}"
  left=$(( ${BUDGET:-585} - ($(date +%s) - t0) )); [ $left -gt 60 ] || return
  FLEET_DECODE_KERNELS=$MAIN timeout $left python3 -m fleet_decode.kernels.lab --sweep --same --prompt $prompt \
    "${libs[@]}" --variants "$vars" --out $T/$name.json 2>&1 | grep -v Warning | tail -9
  echo "$name $(( $(date +%s) - t0 )) s"
}
# Twentieth session: two patched builds of main's hip/ beside the flags, o1 dropped to keep the carry under 64 MiB.
# slim: the plain entry without its wide chunk forms (docs/dropped/plain-entry-without-wide-chunk-forms.patch); the
# first sweep also runs its new path (8-head tasks as two 4-head groups) beside main's same variant. noinl: every
# task kind a call (docs/dropped/task-kinds-not-inlined.patch).
EXTRA="chunk_form=plain + attn_head_groups=2,chunk_form=plain + attn_head_groups=2@slim" \
  sweep sweep111-1024 1024 slim noinl o2 xvec
sweep sweep112-1024 1024 xvec o2 noinl slim
[ -z "$SHORT" ] && sweep sweep113-4096 4096 slim noinl o2 xvec
tar czf $OUT/flags.tgz -C $T .
