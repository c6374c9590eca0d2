# Fourteenth session (2026-12-06), on the machine the pipeline just ran on (its build, build/kernels/sm_90a): one
# sweep a length, each in one process with the default timed twice (--same), of
#  - stage_ahead=next-layer (0.25-0.4 % faster in sweeps 87 and 90, never taken),
#  - the tensor-core chunk where it multiplies 16 real rows: all 16 heads a task (attn_head_groups=1; the decode
#    plan then cuts 16-position chunks at 1,024, 32 at 4,096), or 8 heads (2 groups) at 1,024;
# then a trace at 1,024 for the per-layer budget table of docs/megakernel.md with the two-entry kernel.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
nvidia-smi --query-gpu=name --format=csv,noheader
sweep() {  # prompt, variants
  timeout 200 python3 -m fleet_decode.kernels.lab --sweep --same --prompt $1 --variants "$2" \
    --out $T/sweep107-$1.json 2>&1 | grep -v Warning | tail -7
  echo "sweep107-$1 $(( $(date +%s) - t0 )) s"
}
sweep 1024 "default,stage_ahead=next-layer,chunk_form=tensor-cores + attn_head_groups=2,chunk_form=tensor-cores + attn_head_groups=1"
sweep 4096 "default,stage_ahead=next-layer,attn_head_groups=1,attn_head_groups=1 + attn_chunk=64"
[ $(( $(date +%s) - t0 )) -lt 420 ] && timeout 120 python3 -m fleet_decode.kernels.trace --prompt 1024 \
  --out $T/trace121-1024.json 2>&1 | grep -v Warning | tail -30
echo "all $(( $(date +%s) - t0 )) s"
tar czf $OUT/after.tgz -C $T .
