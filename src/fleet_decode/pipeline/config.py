"""Loads config/config.yaml, validates it against config/config.schema.yaml and fills the schema's
defaults. Errors are one line that names the offending key, e.g.
`config error at hosts.cpu.backend: 'cuda' is not one of ['sim', 'gpu']`."""
import copy
from collections.abc import Mapping
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).resolve().parents[3] / "config" / "config.schema.yaml"


class ConfigError(ValueError):
    pass


def _with_defaults(validator_class):
    import jsonschema

    # jsonschema only checks; this extension (the pattern from its FAQ) also writes each missing
    # property's `default` into the instance before descending into it.
    check_properties = validator_class.VALIDATORS["properties"]

    def fill_then_check(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from check_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": fill_then_check})


def _validator(schema_path: Path):
    import jsonschema  # here, not at the top: a host running only rules needs no jsonschema

    schema = yaml.safe_load(Path(schema_path).read_text())
    return _with_defaults(jsonschema.Draft202012Validator)(schema)


def validate(config: dict, schema_path: Path = SCHEMA_PATH) -> dict:
    """Validates `config` in place (filling defaults) and returns it; raises ConfigError."""
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator(schema_path).iter_errors(config))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"config error at {where}: {error.message}")
    unknown = [t for t in config["targets"] if t not in config["hosts"]]
    if unknown:
        raise ConfigError(f"config error at targets: {unknown[0]!r} is not a key of hosts")
    over_ssh = [t for t in config["targets"] if config["hosts"][t]["transport"] == "ssh"]
    ssh_config = config.get("ssh_config")
    if over_ssh and ssh_config and not Path(ssh_config).expanduser().is_file():
        raise ConfigError(f"config error at ssh_config: {ssh_config} does not exist "
                          f"(target {over_ssh[0]!r} connects over ssh through it)")
    return config


def read(path) -> dict:
    """The YAML of one config file, not yet validated."""
    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise ConfigError(f"config error: cannot read {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"config error: {path} is not valid YAML: {e}".replace("\n", " ")) from e
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise ConfigError(f"config error at (top level): {path} holds a {type(config).__name__}, not a mapping")
    return config


def load(path) -> dict:
    return validate(read(path))


def _merge(base: dict, update) -> dict:
    """Snakemake's merge of config files and --config values: mappings merge key by key."""
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = copy.deepcopy(dict(value) if isinstance(value, Mapping) else value)
    return base


def _typed(text: str, wanted):
    """`text` as the JSON type the schema wants, or None if it does not read as one."""
    wanted = [wanted] if isinstance(wanted, str) else wanted
    for kind in wanted:
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
        for number in ((int,) if kind == "integer" else (int, float) if kind == "number" else ()):
            try:
                return number(text)
            except ValueError:
                pass
    return None


def _given(overrides, path) -> bool:
    for key in path:
        if not isinstance(overrides, Mapping) or key not in overrides:
            return False
        overrides = overrides[key]
    return True


def workflow_config(configfiles, overrides: Mapping, schema_path: Path = SCHEMA_PATH) -> dict:
    """The config a Snakemake run uses, validated exactly as `fleet-decode check-config` validates
    it: the --configfile files alone (never merged over config/config.yaml, which would fill in
    what they lack), then the --config values. Snakemake reads nested --config values as strings
    (YAML's BaseLoader), so a string given there where the schema wants a number or a boolean is
    read as one."""
    config = {}
    for path in configfiles:
        _merge(config, read(path))
    _merge(config, overrides)
    validator = _validator(schema_path)
    for _ in range(1000):  # one string per pass; a config has far fewer
        for error in validator.iter_errors(copy.deepcopy(config)):
            path = list(error.absolute_path)
            value = _typed(error.instance, error.validator_value) if (
                error.validator == "type" and isinstance(error.instance, str) and _given(overrides, path)) else None
            if value is not None:
                parent = config
                for key in path[:-1]:
                    parent = parent[key]
                parent[path[-1]] = value
                break
        else:
            break
    return validate(config, schema_path)


def host_params(host: dict) -> dict:
    """The host settings that change what a milestone computes; evidence records them, and a
    change to any of them makes that evidence stale."""
    keys = ("backend", "model", "compiler", "arch", "prompt_tokens", "decode_tokens", "workers",
            "schedule", "seed", "gates", "bench_prompt_lengths", "bench_runs", "bench_time_budget_s",
            "generate_tokens")
    params = {k: host[k] for k in keys if k in host}
    if host.get("record_host_details"):  # only when set: evidence made without it stays fresh
        params["record_host_details"] = True
    if host.get("expect_gpu"):  # likewise; the milestones refuse to run on any other GPU
        params["expect_gpu"] = host["expect_gpu"]
    return params
