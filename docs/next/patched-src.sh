# Sourced by a call script, from the repository root: `. docs/next/patched-src.sh PATCH`. A scratch copy of src/
# with PATCH's src/ hunks applied (lab-only host code, kept out of the declared sources so that the evidence does
# not go stale), put first on PYTHONPATH; sets t0 (the call's start), T (the scratch folder), L (lab/) and MAIN
# (main's carried library), and prints the GPU's name.
export PYTHONUNBUFFERED=1
t0=$(date +%s); T=$(mktemp -d /tmp/call.XXXXXX)
L=$PWD/lab; MAIN=$L/main/lib/libfleet_kernels.so
cp -r src $T/ && (cd $T && git apply --include='src/*' "$OLDPWD/$1") || exit
export PYTHONPATH=$T/src
nvidia-smi --query-gpu=name --format=csv,noheader
