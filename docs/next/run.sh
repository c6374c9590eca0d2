#!/bin/bash
# Prepared, not measured (the fourth session's device time was spent): two one-line changes to the
# chunk with 4 heads a task (the default at 1,024 positions), timed against main in one process.
#   bash docs/next/run.sh        # on the H200, from the repository root (needs lab/ ignored: .git/info/exclude)
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
t0=$(date +%s)
build() { local d=$PWD/lab/$1; shift; rm -rf $d && mkdir -p $d && cp -r hip $d/
  (cd $d && for p in "$@"; do patch -p1 -s < $p || exit 1; done) || return 1
  python3 -m fleet_decode.kernels.build --arch sm_90a --hip-dir $d/hip --out $d/lib --jobs 5 > $d/build.log 2>&1 || tail -20 $d/build.log; }
build main & build score8 $PWD/docs/next/chunk-score-8-positions.patch & build pv8 $PWD/docs/next/chunk-pv-8-rows.patch & wait
echo "builds $(( $(date +%s) - t0 )) s"; grep -H "fd_megakernel " lab/*/build.log
L() { echo "--library $1=$PWD/lab/$1/lib/libfleet_kernels.so"; }
mkdir -p /tmp/t
FLEET_DECODE_KERNELS=$PWD/lab/main/lib/libfleet_kernels.so timeout 150 python3 -m fleet_decode.kernels.lab --sweep \
  --variants default $(L score8) $(L pv8) --out /tmp/t/sweep-next.json 2>&1 | grep -v Warning
[ -n "$OUT" ] && tar czf $OUT/next.tgz -C /tmp/t .
echo "all done $(( $(date +%s) - t0 )) s"
