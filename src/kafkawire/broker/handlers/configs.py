"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, the broker, its loggers and groups, with
Kafka 4.4's config names, defaults, sources, synonyms, validation and error codes.

Topic configs are stored by the storage engine (persisted); dynamic broker configs are ConfigRecords in the data
directory's KRaft metadata log (engines that keep files; read back on start); group configs live in memory for
the life of the process.

The configs of a resource are listed in the order asked for (first occurrence of a repeated key), or sorted by
name when every config is asked for. Kafka lists them in the iteration order of a Java hash map, which carries
no meaning; clients look configs up by name.
"""

from __future__ import annotations

import logging

from kafkawire.protocol import errors
from kafkawire.protocol.messages import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse

from .. import config as C
from ..dispatch import handles
from ..storage import base as sb
from ._common import find_topic, log, storage_error_code

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, 32
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

DYNAMIC_BROKER_LOGGER_CONFIG = 6
GROUP_CONFIG = 8
UNKNOWN_TYPE = 0  # config_type of broker loggers, as Kafka reports them

DR = DescribeConfigsResponse


class Failed(Exception):
    def __init__(self, code, message):
        self.code, self.message = code, message
        super().__init__(message)


def _keys(requested, known, all_sorted):
    """Config names to describe: all of ``known`` (sorted), or the requested ones kafkawire knows, each once."""
    if requested is None:
        return all_sorted
    return [k for k in dict.fromkeys(requested) if k in known]


# -- DescribeConfigs ----------------------------------------------------------------------------------------


def topic_config_entry(broker, configs: dict, name: str):
    """(value, source, synonyms [(name, value, source)], read_only, sensitive) of topic config ``name``."""
    cfg = broker.config
    d = C.TOPIC_CONFIGS[name]
    synonyms = []
    if name in configs:
        synonyms.append((name, configs[name], C.TOPIC_CONFIG))
    for syn in d.broker_synonyms:
        for source, layer in cfg.broker_layers():
            if syn in layer:
                synonyms.append((syn, layer[syn], source))
    if d.broker_synonyms:  # as Kafka 4.4: the default of the first broker synonym only, when it has one
        bd = C.BROKER_CONFIGS.get(d.broker_synonyms[0])
        if bd is not None and bd.default is not None:
            synonyms.append((d.broker_synonyms[0], bd.default, C.DEFAULT_CONFIG))
    if name in configs:
        value, source = configs[name], C.TOPIC_CONFIG
    else:
        value, source, _ = cfg.topic_default(name)
    return value, source, synonyms, False, False


def _entry(version, name, value, source, synonyms, read_only, type_, doc, with_synonyms, with_doc):
    return DR.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        config_source=source,
        is_default=version == 0 and source == C.DEFAULT_CONFIG,
        is_sensitive=False,
        synonyms=[DR.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in synonyms]
        if with_synonyms
        else [],
        config_type=type_,
        documentation=doc if with_doc else None,
    )


_ALL_TOPIC_KEYS = sorted(k for k, d in C.TOPIC_CONFIGS.items() if not d.internal)
_ALL_BROKER_KEYS = sorted(C.BROKER_CONFIGS)
_ALL_GROUP_KEYS = sorted(C.GROUP_CONFIGS)


def _describe_topic(broker, version, res, with_synonyms, with_doc):
    meta = find_topic(broker, res.resource_name)
    if meta is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, "", []  # Kafka 4.4 sends an empty message here
    out = []
    keys = _keys(res.configuration_keys, C.TOPIC_CONFIGS, _ALL_TOPIC_KEYS)
    if res.configuration_keys is None:  # Kafka lists an internal config a topic sets, first
        keys = [k for k in meta.configs if C.TOPIC_CONFIGS.get(k) and C.TOPIC_CONFIGS[k].internal] + keys
    for name in keys:
        if C.TOPIC_CONFIGS[name].internal and name not in meta.configs:
            continue
        value, source, synonyms, read_only, _ = topic_config_entry(broker, meta.configs, name)
        d = C.TOPIC_CONFIGS[name]
        out.append(_entry(version, name, value, source, synonyms, read_only, d.type, d.doc, with_synonyms, with_doc))
    return 0, "", out


def _describe_broker(broker, version, res, with_synonyms, with_doc):
    if res.resource_name not in ("", str(broker.node_id)):
        return (
            errors.INVALID_REQUEST,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {res.resource_name}",
            [],
        )
    cfg = broker.config
    out = []
    for name in _keys(res.configuration_keys, C.BROKER_CONFIGS, _ALL_BROKER_KEYS):
        d = C.BROKER_CONFIGS[name]
        if res.resource_name == "":  # the cluster-wide default resource shows only dynamic defaults
            if name not in cfg.dynamic_default:
                continue
            value, source = cfg.dynamic_default[name], C.DYNAMIC_DEFAULT_BROKER_CONFIG
            synonyms = [(name, value, source)]
        else:
            value, source = _broker_value(broker, name)
            synonyms = cfg.broker_synonyms(name)
            if name in _DERIVED and source == C.STATIC_BROKER_CONFIG and not synonyms[:1] == [(name, value, source)]:
                synonyms = [(name, value, source)] + [s for s in synonyms if s[2] != C.STATIC_BROKER_CONFIG]
        out.append(_entry(version, name, value, source, synonyms, d.read_only, d.type, d.doc, with_synonyms, with_doc))
    return 0, "", out


# Keys ``kafkawire serve`` always sets, from server.properties, its command line (--listen, --advertised,
# --data-dir, --node-id, --storage) or its defaults: reported as Kafka reports what its server.properties
# sets, STATIC_BROKER_CONFIG, whichever way they were given.
_DERIVED = ("node.id", "broker.id", "listeners", "advertised.listeners", "log.dirs", "kafkawire.storage")


def _broker_value(broker, name):
    cfg = broker.config
    value, source = cfg.broker_value(name)
    if name in _DERIVED and source in (C.DEFAULT_CONFIG, C.STATIC_BROKER_CONFIG):
        host, port = broker.advertised
        derived = {
            "node.id": str(cfg.node_id),
            "broker.id": str(cfg.node_id),
            "listeners": f"PLAINTEXT://{cfg.host}:{broker.server.port if broker.server else cfg.port}",
            "advertised.listeners": f"PLAINTEXT://{host}:{port}",
            "log.dirs": cfg.data_dir,
            "kafkawire.storage": cfg.storage,
        }
        if source == C.DEFAULT_CONFIG or name not in ("listeners", "advertised.listeners", "log.dirs"):
            return derived[name], C.STATIC_BROKER_CONFIG
    return value, source


# -- broker loggers -------------------------------------------------------------------------------------------
# kafkawire's loggers are its Python loggers (root and kafkawire.*), named as they are. A few Kafka logger names
# that operators set by habit stand for the kafkawire logger doing that job, so that setting one of them (say
# kafka.server.KafkaApis=DEBUG to watch requests) has the effect it has on Kafka.
KAFKA_LOGGER_ALIASES = {
    "kafka.server.KafkaApis": "kafkawire.broker",
    "kafka.request.logger": "kafkawire.net",
    "org.apache.kafka.storage.internals.log.LogManager": "kafkawire.storage",
    "org.apache.kafka.coordinator.group.GroupCoordinatorService": "kafkawire.groups",
}
LOG4J_LEVELS = ("DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN")
_TRACE = 5
_TO_PYTHON = {
    "TRACE": _TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}


def _log4j_level(level: int) -> str:
    for name, value in sorted(_TO_PYTHON.items(), key=lambda kv: kv[1]):
        if level <= value:
            return name
    return "FATAL"


def _python_logger(name: str) -> logging.Logger:
    name = KAFKA_LOGGER_ALIASES.get(name, name)
    return logging.getLogger(None if name == "root" else name)


def _logger_names() -> list[str]:
    own = sorted(
        n
        for n, obj in logging.root.manager.loggerDict.items()
        if n.startswith("kafkawire") and isinstance(obj, logging.Logger)
    )
    return ["root", *own, *KAFKA_LOGGER_ALIASES]


def _check_logger_node(broker, name: str) -> None:
    try:
        node = int(name)
    except ValueError:
        raise Failed(errors.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}") from None
    if node != broker.node_id:
        raise Failed(errors.INVALID_REQUEST, f"Unexpected node id. Expected {broker.node_id}, but received {node}")


def _describe_loggers(broker, version, res, with_synonyms, with_doc):
    """The broker's loggers and their levels in log4j's names. As Kafka lists loggers: no synonyms, no type,
    an empty documentation string."""
    try:
        _check_logger_node(broker, res.resource_name)
    except Failed as exc:
        return exc.code, exc.message, []
    names = _logger_names()
    if res.configuration_keys is not None:
        names = [n for n in dict.fromkeys(res.configuration_keys) if n in names]
    out = []
    for name in names:
        level = _log4j_level(_python_logger(name).getEffectiveLevel())
        out.append(
            DR.DescribeConfigsResourceResult(
                name=name,
                value=level,
                read_only=False,
                config_source=DYNAMIC_BROKER_LOGGER_CONFIG,
                is_default=False,
                is_sensitive=False,
                synonyms=[],
                config_type=UNKNOWN_TYPE,
                documentation="",
            )
        )
    return 0, "", out


# -- groups -------------------------------------------------------------------------------------------------


def _describe_group(broker, version, res, with_synonyms, with_doc):
    configs = broker.config.group_configs.get(res.resource_name, {})
    out = []
    for name in _keys(res.configuration_keys, C.GROUP_CONFIGS, _ALL_GROUP_KEYS):
        d = C.GROUP_CONFIGS[name]
        synonyms = _group_synonyms(broker, configs, name)
        _, value, source = synonyms[0]
        out.append(_entry(version, name, value, source, synonyms, False, d.type, "", with_synonyms, with_doc))
    return 0, "", out


def _group_synonyms(broker, configs: dict, name: str):
    d = C.GROUP_CONFIGS[name]
    out = []
    if name in configs:
        out.append((name, configs[name], GROUP_CONFIG))
    for source, layer in broker.config.broker_layers():
        if d.broker_synonym in layer:
            out.append((d.broker_synonym, layer[d.broker_synonym], source))
    out.append((d.broker_synonym, d.default, C.DEFAULT_CONFIG))
    return out


@handles("DescribeConfigs", 0, 4)
def describe_configs(broker, ctx, body):
    version = ctx.api_version
    with_synonyms = version >= 1 and body.include_synonyms
    with_doc = version >= 3 and body.include_documentation
    results = []
    for res in body.resources:
        if res.resource_type == TOPIC:
            code, message, configs = _describe_topic(broker, version, res, with_synonyms, with_doc)
        elif res.resource_type == BROKER:
            code, message, configs = _describe_broker(broker, version, res, with_synonyms, with_doc)
        elif res.resource_type == BROKER_LOGGER:
            code, message, configs = _describe_loggers(broker, version, res, with_synonyms, with_doc)
        elif res.resource_type == GROUP:
            code, message, configs = _describe_group(broker, version, res, with_synonyms, with_doc)
        else:
            code, message, configs = errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}", []
        results.append(
            DR.DescribeConfigsResult(
                error_code=code,
                error_message=message,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
                configs=configs,
            )
        )
    return DR(throttle_time_ms=0, results=results)


# -- validation shared by AlterConfigs and IncrementalAlterConfigs --------------------------------------------

_MIN_ISR = "min.insync.replicas"


def _check_broker_resource(broker, name):
    if name not in ("", str(broker.node_id)):
        raise Failed(errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, but received {name}")


def _validate_broker_changes(broker, name: str, new: dict, layer: dict):
    """``new``: the whole layer afterwards. Keys kafkawire does not know are accepted and kept, as Kafka keeps
    dynamic broker configs it has no definition for; known keys must be dynamic and well typed."""
    changed = {k: v for k, v in new.items() if layer.get(k) != v}
    read_only = [k for k in changed if k in C.BROKER_CONFIGS and C.BROKER_CONFIGS[k].read_only]
    if read_only:
        raise Failed(errors.INVALID_REQUEST, f"Cannot update these configs dynamically: [{', '.join(read_only)}]")
    for key, value in changed.items():
        d = C.BROKER_CONFIGS.get(key)
        if d is not None:
            try:
                C.validate_value(d.type, value, key)
            except C.ConfigError as exc:
                raise Failed(errors.INVALID_REQUEST, str(exc)) from None
    if name == "" and _MIN_ISR in layer and _MIN_ISR not in new:
        raise Failed(errors.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")


async def _apply_broker(broker, name, new: dict):
    layer = broker.config.dynamic if name else broker.config.dynamic_default
    if getattr(broker, "metadata_log", None) is not None:
        # ConfigRecords in the KRaft metadata log, as Kafka keeps them, fsynced in the controller thread: the loop
        # goes on serving, the answer (and the change taking effect) waits until the records are durable
        await broker.controller_call(broker.metadata_log.save_configs, BROKER, name, new)
    layer.clear()
    layer.update(new)
    broker.config.apply_dynamic()
    log.info("dynamic broker configs %s now %s", "for this broker" if name else "(cluster default)", new)


def _validate_topic_changes(changes: dict):
    for key, value in changes.items():
        try:
            C.validate_topic_config(key, value)
        except C.ConfigError as exc:
            raise Failed(errors.INVALID_CONFIG, str(exc)) from None


async def _apply_topic(broker, name, full: dict):
    """``full``: every explicit config the topic should have afterwards. Written (and fsynced) by the storage in
    the controller thread, off the loop; the answer waits for it."""
    meta = find_topic(broker, name)
    changes = dict(full)
    for k in meta.configs:
        if k not in full:
            changes[k] = None
    await broker.controller_call(broker.storage.set_topic_configs, name, changes)
    log.info("topic %s configs now %s", name, full)


def _validate_group_changes(broker, changes: dict):
    for key, value in changes.items():
        try:
            C.validate_group_config(key, value, lambda k: broker.config.broker_value(k)[0])
        except C.ConfigError as exc:
            raise Failed(errors.INVALID_CONFIG, str(exc)) from None


def _apply_group(broker, name, new: dict):
    if new:
        broker.config.group_configs[name] = dict(new)
    else:
        broker.config.group_configs.pop(name, None)
    log.info("group %s configs now %s", name, new)


def _existing_topic(broker, name):
    meta = find_topic(broker, name)
    if meta is None:
        raise Failed(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
    return meta


# -- AlterConfigs -------------------------------------------------------------------------------------------


@handles("AlterConfigs", 0, 2)
async def alter_configs(broker, ctx, body):
    """Config changes queue on the controller lock, as topic changes do: each request is validated against the
    state the one before left, and answered once its change is durable."""
    async with broker.controller_lock():
        return await _alter_configs(broker, ctx, body)


async def _alter_configs(broker, ctx, body):
    R = AlterConfigsResponse
    out = []
    for res in body.resources:
        r = R.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        try:
            if res.resource_type not in (TOPIC, BROKER, GROUP):
                raise Failed(errors.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")
            for c in res.configs:
                if c.value is None:
                    raise Failed(errors.INVALID_REQUEST, f"Null value not supported for : {c.name}")
            new = {c.name: c.value for c in res.configs}
            if res.resource_type == TOPIC:
                _existing_topic(broker, res.resource_name)
                _validate_topic_changes(new)
                if not body.validate_only:
                    await _apply_topic(broker, res.resource_name, new)
            elif res.resource_type == BROKER:
                _check_broker_resource(broker, res.resource_name)
                layer = broker.config.dynamic if res.resource_name else broker.config.dynamic_default
                _validate_broker_changes(broker, res.resource_name, new, layer)
                if not body.validate_only:
                    await _apply_broker(broker, res.resource_name, new)
            else:
                _validate_group_changes(broker, new)
                if not body.validate_only:
                    _apply_group(broker, res.resource_name, new)
        except Failed as exc:
            r.error_code, r.error_message = exc.code, exc.message
        except sb.StorageError as exc:
            r.error_code, r.error_message = storage_error_code(exc), str(exc)
    return R(throttle_time_ms=0, responses=out)


# -- IncrementalAlterConfigs ----------------------------------------------------------------------------------


def _incremental(current: dict, configs, list_keys: dict, *, not_a_list) -> dict:
    """The configs after applying ``configs``' operations to ``current``. ``list_keys``: the current value of
    every LIST-typed key; ``not_a_list(op, name)`` is the error for APPEND/SUBTRACT on another key."""
    new = dict(current)
    for c in configs:
        op = c.config_operation
        if op == SET:
            if c.value is None:
                raise Failed(errors.INVALID_REQUEST, f"Null value not supported for : {c.name}")
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        else:
            if c.name not in list_keys:
                raise not_a_list(op, c.name)
            items = [v for v in (new.get(c.name, list_keys[c.name]) or "").split(",") if v]
            given = [v for v in (c.value or "").split(",") if v]
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[c.name] = ",".join(items)
    return new


def _topic_not_a_list(op, name):
    return Failed(errors.INVALID_CONFIG, f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.")


def _broker_not_a_list(op, name):
    return Failed(errors.INVALID_CONFIG, f"Config value {_OP_NAMES[op].lower()} is not allowed for config key: {name}")


def _alter_loggers(broker, res, validate_only):
    _check_logger_node(broker, res.resource_name)
    known = set(_logger_names())
    changes = []
    for c in res.configs:
        if c.config_operation in (APPEND, SUBTRACT):
            raise Failed(
                errors.INVALID_REQUEST,
                f"{_OP_NAMES[c.config_operation]} operation is not allowed for the BROKER_LOGGER resource",
            )
        if c.name not in known:
            raise Failed(errors.INVALID_CONFIG, f"Logger {c.name} does not exist!")
        if c.config_operation == DELETE:
            if c.name == "root":
                raise Failed(errors.INVALID_REQUEST, "Removing the log level of the root logger is not allowed")
            changes.append((c.name, logging.NOTSET))  # back to inheriting its parent's level
            continue
        level = (c.value or "").upper()
        if level not in LOG4J_LEVELS:
            raise Failed(
                errors.INVALID_CONFIG,
                f"Cannot set the log level of {c.name} to {c.value} as it is not a supported log level. "
                f"Valid log levels are {', '.join(LOG4J_LEVELS)}",
            )
        changes.append((c.name, _TO_PYTHON[level]))
    if not validate_only:
        for name, level in changes:
            _python_logger(name).setLevel(level)
            log.info("log level of %s now %s", name, logging.getLevelName(level))


@handles("IncrementalAlterConfigs", 0, 1)
async def incremental_alter_configs(broker, ctx, body):
    async with broker.controller_lock():
        return await _incremental_alter_configs(broker, ctx, body)


async def _incremental_alter_configs(broker, ctx, body):
    R = IncrementalAlterConfigsResponse
    out = []
    for res in body.resources:
        r = R.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        out.append(r)
        try:
            names = [c.name for c in res.configs]
            if len(set(names)) != len(names):
                raise Failed(errors.INVALID_REQUEST, "Error due to duplicate config keys")
            if any(c.config_operation not in _OP_NAMES for c in res.configs):
                # Kafka fails such a resource with an unexpected server error and no message
                raise Failed(errors.UNKNOWN_SERVER_ERROR, None)
            if res.resource_type == TOPIC:
                meta = _existing_topic(broker, res.resource_name)
                for c in res.configs:
                    if c.name not in C.TOPIC_CONFIGS and c.config_operation != DELETE:
                        raise Failed(errors.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
                list_keys = {
                    k: broker.config.topic_value(meta.configs, k)
                    for k, d in C.TOPIC_CONFIGS.items()
                    if d.type == C.LIST
                }
                ops = [c for c in res.configs if c.name in C.TOPIC_CONFIGS]
                new = _incremental(meta.configs, ops, list_keys, not_a_list=_topic_not_a_list)
                _validate_topic_changes({k: v for k, v in new.items() if meta.configs.get(k) != v})
                if not body.validate_only:
                    await _apply_topic(broker, res.resource_name, new)
            elif res.resource_type == BROKER:
                _check_broker_resource(broker, res.resource_name)
                layer = broker.config.dynamic if res.resource_name else broker.config.dynamic_default
                list_keys = {
                    k: broker.config.broker_value(k)[0] for k, d in C.BROKER_CONFIGS.items() if d.type == C.LIST
                }
                new = _incremental(layer, res.configs, list_keys, not_a_list=_broker_not_a_list)
                _validate_broker_changes(broker, res.resource_name, new, layer)
                if not body.validate_only:
                    await _apply_broker(broker, res.resource_name, new)
            elif res.resource_type == BROKER_LOGGER:
                _alter_loggers(broker, res, body.validate_only)
            elif res.resource_type == GROUP:
                current = broker.config.group_configs.get(res.resource_name, {})
                for c in res.configs:
                    if c.name not in C.GROUP_CONFIGS and c.config_operation != DELETE:
                        raise Failed(errors.INVALID_CONFIG, f"Unknown group config name: {c.name}")
                list_keys = {k: current.get(k, d.default) for k, d in C.GROUP_CONFIGS.items() if d.type == C.LIST}
                ops = [c for c in res.configs if c.name in C.GROUP_CONFIGS]
                new = _incremental(current, ops, list_keys, not_a_list=_topic_not_a_list)
                _validate_group_changes(broker, {k: v for k, v in new.items() if current.get(k) != v})
                if not body.validate_only:
                    _apply_group(broker, res.resource_name, new)
            else:
                raise Failed(errors.INVALID_REQUEST, f"Unknown resource type {res.resource_type}")
        except Failed as exc:
            r.error_code, r.error_message = exc.code, exc.message
        except sb.StorageError as exc:
            r.error_code, r.error_message = storage_error_code(exc), str(exc)
    return R(throttle_time_ms=0, responses=out)
