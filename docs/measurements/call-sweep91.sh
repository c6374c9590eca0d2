# Sweep 91 and trace 113 (2026-12-04, eighth session; seventh call): staged tiles whose task waits for its own
# copy once its activations are loaded (lab/defer: main's hip/ with docs/dropped/stage-wait-in-the-task.patch;
# the q/kv, q-absorb, o_proj and router tasks), against main's kernels (lab/sk64c), both built on the laptop,
# on the 080f87d defaults, one process; then both traced. Carry the two libraries.
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 FLEET_DECODE_KERNELS=$PWD/lab/sk64c/lib/libfleet_kernels.so
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
V="default@defer,default,default@defer,stage_ahead=next-layer@defer,default@defer"
timeout 100 python3 -m fleet_decode.kernels.lab --sweep $(L defer) --variants "$V" --out $T/sweep91.json 2>&1 | grep -v Warning
echo "sweep91 $(( $(date +%s) - t0 )) s"
timeout 100 python3 -m fleet_decode.kernels.trace --variant default $(L defer) $(L sk64c) --out $T/trace113.json \
  --raw $T/trace113.npz 2>&1 | grep -v Warning | grep -E "^(kv_a|q_proj|q_absorb|attn|o_proj|router|route|moe|out|MoE|ROUTER|ROPE|O_PROJ|RMSNORM)" | tail -40
echo "trace113 $(( $(date +%s) - t0 )) s"
tar czf $OUT/next.tgz -C $T .
