"""Which of part 26's forms becomes decode_plan's default, by the pool sweep (docs/next/pool/call-pool.sh):
   python3 docs/next/pool/pick.py SWEEP_DIR CANDIDATES_DIR     (prints the candidate's name, or "default")
A candidate (a directory of CANDIDATES_DIR named as its sweep variant, with spaces as '_') is eligible where the GPU
tests passed (SWEEP_DIR/tests.rc is 0), its tokens were the same in every launch at both lengths, and its P50 is at
least 1 % under the same process's default at 1,024 positions and not over it at 4,096; of those, the lowest sum of
the two ratios wins. Anything missing (a sweep cut short, a failed test) leaves the default."""
import json
import sys
from pathlib import Path

MIN_GAIN_1024, MAX_RATIO_4096 = 0.99, 1.0


def pick(sweeps: Path, candidates: Path) -> str:
    rc = sweeps / "tests.rc"
    if not rc.exists() or rc.read_text().strip() != "0":
        print(f"GPU tests: {rc.read_text().strip() if rc.exists() else 'not run'}; keeping the default", file=sys.stderr)
        return "default"
    rows = {}
    for prompt in (1024, 4096):
        path = sweeps / f"sweep-{prompt}-pool.json"
        if not path.exists():
            print(f"{path} missing; keeping the default", file=sys.stderr)
            return "default"
        rows[prompt] = json.loads(path.read_text())["variants"]
    scores = {}
    for cand in sorted(p.name for p in candidates.iterdir() if p.is_dir()):
        name = cand.replace("_", " ")
        ratios = []
        for prompt, variants in rows.items():
            row, base = variants.get(name, {}), variants.get("default", {})
            if "p50_ms" not in row or "p50_ms" not in base or not row.get("same_tokens_every_launch"):
                break
            ratios.append(row["p50_ms"] / base["p50_ms"])
        if len(ratios) == 2:
            print(f"{name}: {ratios[0]:.4f} at 1,024, {ratios[1]:.4f} at 4,096 of the default", file=sys.stderr)
            if ratios[0] <= MIN_GAIN_1024 and ratios[1] <= MAX_RATIO_4096:
                scores[cand] = sum(ratios)
    return min(scores, key=scores.get) if scores else "default"


if __name__ == "__main__":
    print(pick(Path(sys.argv[1]), Path(sys.argv[2])))
