"""fleet-decode command line: one command for everything (`fleet-decode <command> --help` for each).

  fleet-decode generate --model tiny --device cpu --prompt-ids 1,2,3 --max-new-tokens 16   # decode, streamed
  fleet-decode bench --model tiny --device cpu --prompt-lengths 16 --tokens 4 --runs 1     # P50 ms/token vs the floor
  fleet-decode compare --model tiny --prefill 64 --steps 32     # the reference decode step vs HF eager
  fleet-decode graph --model random:deepseek-coder-v2-lite --workers 132   # task-graph counts, bytes per token
  fleet-decode sim --model tiny --tokens 8 --workers 8 --check  # greedy decode through the CPU simulator
  fleet-decode audit [--root .] [--json]      # fresh / stale / invalid per evidence file, and the report
  fleet-decode check-config [config.yaml]     # validate a workflow config (default config/config.yaml)

`python -m fleet_decode <command> ...` is the same; each command's module also runs alone
(python -m fleet_decode.generate, .bench, .model.compare, .graph, .sim).
"""
import importlib
import sys

from fleet_decode.cli import quiet_broken_pipe

# command -> the module whose main(argv) runs it
COMMANDS = {
    "generate": "fleet_decode.generate",
    "bench": "fleet_decode.bench.__main__",
    "compare": "fleet_decode.model.compare",
    "graph": "fleet_decode.graph.__main__",
    "sim": "fleet_decode.sim.__main__",
    "audit": "fleet_decode.pipeline.audit",
}


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
    if "-h" in rest or "--help" in rest:
        print("example:\n" + "\n".join(line for line in __doc__.splitlines()
                                        if line.startswith(f"  fleet-decode {command} ")) + "\n")
    if command in COMMANDS:
        return importlib.import_module(COMMANDS[command]).main(rest) or 0
    if command == "check-config":
        return check_config(rest)
    print(f"fleet-decode: unknown command {command!r} (try: {', '.join([*COMMANDS, 'check-config'])})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
