"""fleet-decode command line.

  python -m fleet_decode audit [--root .] [--json]   # fresh / stale / invalid per evidence file
  fleet-decode audit                                  # the same, as the installed console script
"""
import sys


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "audit":
        from fleet_decode.pipeline.audit import main as audit_main
        return audit_main(rest)
    print(f"fleet-decode: unknown command {command!r} (try: audit)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
