# Everything the two calls of docs/next/README.md ("Ready to run") need on the laptop, after main's last commit:
# lab/ and .whl ignored, the device wheels copied, main's library built for sm_90a if lab/main26 lacks one built from
# this hip/ (nvcc compiles without a GPU; ~1 minute), then the candidates and main's deploy manifest.
#   bash docs/next/pool/prepare.sh    (from the repository root)
set -e
# the candidates and the manifests are made from HEAD, and what travels is the working tree: they must be the same
test -z "$(git status --porcelain)" || { echo "the checkout has changes: commit them and run this again"; exit 1; }
mkdir -p .git/info
for path in /.whl/ /lab/; do grep -qxF "$path" .git/info/exclude 2>/dev/null || echo "$path" >> .git/info/exclude; done
rm -rf .whl && cp -r ../shared/device-wheels .whl
hip_tree=$(git rev-parse HEAD:hip)
if [ "$(cat lab/main26/hip-tree 2>/dev/null)" != "$hip_tree" ] || [ ! -f lab/main26/lib/libfleet_kernels.so ]; then
  rm -rf lab/main26 && python -m fleet_decode.kernels.build --arch sm_90a --out lab/main26/lib --jobs 2 > /dev/null
  echo "$hip_tree" > lab/main26/hip-tree
fi
echo "lab/main26/lib/libfleet_kernels.so: hip/ at tree $hip_tree"
bash docs/next/pool/make-candidates.sh
