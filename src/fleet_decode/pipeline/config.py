"""Loads config/config.yaml, validates it against config/config.schema.yaml and fills the schema's
defaults. Errors are one line that names the offending key, e.g.
`config error at hosts.cpu.backend: 'cuda' is not one of ['sim', 'gpu']`."""
import copy
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


def validate(config: dict, schema_path: Path = SCHEMA_PATH) -> dict:
    """Validates `config` in place (filling defaults) and returns it; raises ConfigError."""
    import jsonschema  # here, not at the top: a host running only rules needs no jsonschema

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is not None:
        where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
        raise ConfigError(f"config error at {where}: {error.message}")
    unknown = [t for t in config["targets"] if t not in config["hosts"]]
    if unknown:
        raise ConfigError(f"config error at targets: {unknown[0]!r} is not a key of hosts")
    return config


def load(path) -> dict:
    try:
        config = yaml.safe_load(Path(path).read_text()) or {}
    except OSError as e:
        raise ConfigError(f"config error: cannot read {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"config error: {path} is not valid YAML: {e}".replace("\n", " ")) from e
    return validate(config)


def host_params(host: dict) -> dict:
    """The host settings that change what a milestone computes; evidence records them, and a
    change to any of them makes that evidence stale."""
    keys = ("backend", "model", "compiler", "arch", "prompt_tokens", "decode_tokens", "workers",
            "schedule", "seed", "gates", "bench_prompt_lengths", "bench_runs", "bench_time_budget_s")
    params = {k: host[k] for k in keys if k in host}
    if host.get("record_host_details"):  # only when set: evidence made without it stays fresh
        params["record_host_details"] = True
    return params
