"""python -m fleet_decode.kernels.checks: M1's device checks by hand on a GPU host, as a table."""
import argparse
import json
import sys

import torch

from fleet_decode.kernels.checks import __doc__ as DOC, check_all
from fleet_decode.kernels.library import load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=DOC.splitlines()[0])
    parser.add_argument("--lib", help="path of libfleet_kernels.so (default: build for this GPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kinds", help="comma-separated kinds, or parts of their names (default: all)")
    parser.add_argument("--bf16", action="store_true", help="also check on bf16 activations (HF's storage type)")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    lib = load(args.lib) if args.lib else load()
    activations = (torch.float32, torch.bfloat16) if args.bf16 else (torch.float32,)
    results = check_all(args.seed, "cuda", lib, args.kinds.split(",") if args.kinds else None,
                        activations=activations)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "seed": args.seed, "kernels": results}, f, indent=2)
    print(f"{'kind':26s} {'pass':5s} {'max_rel':>9s} {'tol':>7s} {'us':>8s} {'eager':>8s} {'GB/s':>7s}  shape")
    for kind, r in results.items():
        print(f"{kind:26s} {str(r['passed']):5s} {r['max_rel']:9.2e} {r['tol']:7.0e} {r['us']:8.2f} "
              f"{r['us_eager']:8.2f} {r['gbps']:7.1f}  {r['shape']}  {r['note']}")
    return 0 if all(r["passed"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
