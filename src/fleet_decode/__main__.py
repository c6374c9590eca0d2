"""fleet-decode command line.

  python -m fleet_decode audit [--root .] [--json]      # fresh / stale / invalid per evidence file, and the report
  python -m fleet_decode check-config [config.yaml]     # validate a workflow config (default config/config.yaml)
  fleet-decode audit | check-config                     # the same, as the installed console script
"""
import sys

from fleet_decode.cli import quiet_broken_pipe


def check_config(argv) -> int:
    from fleet_decode.cli import OneLineParser
    from fleet_decode.pipeline.config import ConfigError, load

    parser = OneLineParser(prog="fleet-decode check-config",
                                     description="Validate a workflow config against config/config.schema.yaml "
                                                 "(the check Snakemake runs first), printing the first error.")
    parser.add_argument("config", nargs="?", default="config/config.yaml")
    args = parser.parse_args(argv)
    try:
        config = load(args.config)
    except ConfigError as error:
        print(f"{args.config}: {error}", file=sys.stderr)
        return 1
    hosts = ", ".join(f"{name} ({host['transport']}, {host['backend']})" for name, host in config["hosts"].items())
    print(f"{args.config}: valid; targets {config['targets']}; hosts {hosts}")
    return 0


@quiet_broken_pipe
def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "audit":
        from fleet_decode.pipeline.audit import main as audit_main
        return audit_main(rest)
    if command == "check-config":
        return check_config(rest)
    print(f"fleet-decode: unknown command {command!r} (try: audit, check-config)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
