# Part 26's forms as candidate defaults for docs/next/pool/call-pick-pipeline.sh: for each, a branch cand/NAME of one
# commit on main's HEAD (decode_plan's three sum constants), its patch and its deploy manifest in lab/cands/NAME; then
# main's own manifest. Run it after main's last commit before the call (a later commit on main makes the candidates'
# manifests name files the carried tree no longer has, and the pipeline refuses to deploy them).
#   bash docs/next/pool/make-candidates.sh    (from the repository root)
set -e
root=$PWD; head=$(git rev-parse HEAD)
rm -rf lab/cands /tmp/fd-cand && mkdir -p lab/cands && git worktree prune
git worktree add -q --detach /tmp/fd-cand "$head"
for spec in "fixed-point_sum fixed-point 0 False" "fixed-point_sum_tail fixed-point 0 True" "pool_16 fixed-point 16 False" \
            "pool_32 fixed-point 32 False" "pool_64 fixed-point 64 False" "pool_32_sum_tail fixed-point 32 True"; do
  set -- $spec; name=$1
  (cd /tmp/fd-cand && git checkout -q -B "cand/$name" "$head" &&
   sed -i "s/^DECODE_SPLIT_K_SUM = .*/DECODE_SPLIT_K_SUM = \"$2\"/; s/^DECODE_ROUTED_POOL_ROWS = .*/DECODE_ROUTED_POOL_ROWS = $3/; s/^DECODE_SUM_IN_ONE_TILE = .*/DECODE_SUM_IN_ONE_TILE = $4/" src/fleet_decode/graph/plan.py &&
   git commit -qam "decode_plan defaults to part 26's \"${name//_/ }\" (split_k_sum $2, routed_pool_rows $3, one sum tile $4)

A candidate, picked by docs/next/pool/pick.py from the pool sweep of the same warm machine (docs/next/pool/):
at least 1 % under main's default at 1,024 positions, not over it at 4,096, the GPU tests passed." &&
   PYTHONPATH=/tmp/fd-cand/src python -m fleet_decode.pipeline.deploy --repo /tmp/fd-cand > /dev/null &&
   mkdir -p "$root/lab/cands/$name" && mv DEPLOY_MANIFEST.json "$root/lab/cands/$name/" &&
   git diff "$head" HEAD > "$root/lab/cands/$name/plan.patch")
  echo "cand/$name: $(git rev-parse --short cand/$name)"
done
git worktree remove --force /tmp/fd-cand
PYTHONPATH=$root/src python -m fleet_decode.pipeline.deploy
