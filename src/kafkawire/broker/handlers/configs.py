"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics and the broker, with Kafka's config names,
defaults, sources and synonyms.

Topic configs are stored by the storage engine (persisted); dynamic broker configs live in memory for the
life of the process.
"""
from __future__ import annotations

from kafkawire.protocol import errors
from kafkawire.protocol.messages import AlterConfigsResponse, DescribeConfigsResponse, IncrementalAlterConfigsResponse

from .. import config as C
from ..dispatch import handles
from ..storage import base as sb
from ._common import find_topic, log, storage_error_code

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

DR = DescribeConfigsResponse


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
        name=name, value=value, read_only=read_only, config_source=source,
        is_default=version == 0 and source == C.DEFAULT_CONFIG,
        is_sensitive=False,
        synonyms=[DR.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in synonyms] if with_synonyms
        else [],
        config_type=type_, documentation=doc if with_doc else None)


def _describe_topic(broker, version, res, with_synonyms, with_doc):
    meta = find_topic(broker, res.resource_name)
    if meta is None:
        return errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist", []
    keys = sorted(C.TOPIC_CONFIGS) if res.configuration_keys is None else \
        [k for k in res.configuration_keys if k in C.TOPIC_CONFIGS]
    out = []
    for name in keys:
        value, source, synonyms, read_only, _ = topic_config_entry(broker, meta.configs, name)
        out.append(_entry(version, name, value, source, synonyms, read_only, C.TOPIC_CONFIGS[name].type, "",
                          with_synonyms, with_doc))
    return 0, None, out


def _describe_broker(broker, version, res, with_synonyms, with_doc):
    if res.resource_name not in ("", str(broker.node_id)):
        return errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} or empty string, but " \
                                       f"received {res.resource_name}", []
    cfg = broker.config
    keys = sorted(C.BROKER_CONFIGS) if res.configuration_keys is None else \
        [k for k in res.configuration_keys if k in C.BROKER_CONFIGS]
    out = []
    for name in keys:
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
        out.append(_entry(version, name, value, source, synonyms, d.read_only, d.type, d.doc, with_synonyms,
                          with_doc))
    return 0, None, out


# Keys ``kafkawire serve`` always sets, from server.properties, its command line (--listen, --advertised,
# --data-dir, --node-id, --storage) or its defaults: reported as Kafka reports what its server.properties
# sets, STATIC_BROKER_CONFIG, whichever way they were given.
_DERIVED = ("node.id", "broker.id", "listeners", "advertised.listeners", "log.dirs", "kafkawire.storage")


def _broker_value(broker, name):
    cfg = broker.config
    value, source = cfg.broker_value(name)
    if name in _DERIVED and source in (C.DEFAULT_CONFIG, C.STATIC_BROKER_CONFIG):
        host, port = broker.advertised
        derived = {"node.id": str(cfg.node_id), "broker.id": str(cfg.node_id),
                   "listeners": f"PLAINTEXT://{cfg.host}:{broker.server.port if broker.server else cfg.port}",
                   "advertised.listeners": f"PLAINTEXT://{host}:{port}",
                   "log.dirs": cfg.data_dir, "kafkawire.storage": cfg.storage}
        if source == C.DEFAULT_CONFIG or name not in ("listeners", "advertised.listeners", "log.dirs"):
            return derived[name], C.STATIC_BROKER_CONFIG
    return value, source


DYNAMIC_BROKER_LOGGER_CONFIG = 6
_LOG4J = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "INFO"}


def _describe_loggers(broker, version, res, with_synonyms, with_doc):
    """The broker's loggers and their levels, named and leveled the way Kafka's log4j loggers are."""
    import logging

    if res.resource_name not in ("", str(broker.node_id)):
        return errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, but received " \
                                       f"{res.resource_name}", []
    names = ["root"] + sorted(n for n in logging.root.manager.loggerDict if n.startswith("kafkawire"))
    if res.configuration_keys is not None:
        names = [n for n in names if n in res.configuration_keys]
    out = []
    for name in names:
        logger = logging.getLogger(None if name == "root" else name)
        level = logging.getLevelName(logger.getEffectiveLevel())
        level = _LOG4J.get(level, level)
        out.append(_entry(version, name, level, DYNAMIC_BROKER_LOGGER_CONFIG,
                          [(name, level, DYNAMIC_BROKER_LOGGER_CONFIG)], False, C.STRING, None, with_synonyms,
                          with_doc))
    return 0, None, out


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
        else:
            code, message, configs = errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}", []
        results.append(DR.DescribeConfigsResult(error_code=code, error_message=message,
                                                resource_type=res.resource_type, resource_name=res.resource_name,
                                                configs=configs))
    return DR(throttle_time_ms=0, results=results)


class Failed(Exception):
    def __init__(self, code, message):
        self.code, self.message = code, message
        super().__init__(message)


def _check_broker_resource(broker, name):
    if name not in ("", str(broker.node_id)):
        raise Failed(errors.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id} or empty string, "
                                             f"but received {name}")


def _validate_broker_changes(changes: dict):
    for key, value in changes.items():
        d = C.BROKER_CONFIGS.get(key)
        if d is None:
            raise Failed(errors.INVALID_CONFIG, f"Unknown broker config name: {key}")
        if d.read_only:
            raise Failed(errors.INVALID_REQUEST, f"Cannot update these configs dynamically: [{key}]")
        try:
            C.validate_value(d.type, value, key)
        except C.ConfigError as exc:
            raise Failed(errors.INVALID_CONFIG, str(exc)) from None


def _apply_broker(broker, name, new: dict):
    layer = broker.config.dynamic if name else broker.config.dynamic_default
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


def _apply_topic(broker, name, configs: dict, full: dict):
    """``full``: every explicit config the topic should have afterwards."""
    meta = find_topic(broker, name)
    changes = {k: v for k, v in full.items()}
    for k in meta.configs:
        if k not in full:
            changes[k] = None
    broker.storage.set_topic_configs(name, changes)
    log.info("topic %s configs now %s", name, full)


@handles("AlterConfigs", 0, 2)
def alter_configs(broker, ctx, body):
    R = AlterConfigsResponse
    out = []
    for res in body.resources:
        r = R.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=res.resource_type,
                                           resource_name=res.resource_name)
        out.append(r)
        new = {c.name: c.value for c in res.configs if c.value is not None}
        try:
            if res.resource_type == TOPIC:
                if find_topic(broker, res.resource_name) is None:
                    raise Failed(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist")
                _validate_topic_changes(new)
                if not body.validate_only:
                    _apply_topic(broker, res.resource_name, res.configs, new)
            elif res.resource_type == BROKER:
                _check_broker_resource(broker, res.resource_name)
                _validate_broker_changes(new)
                if not body.validate_only:
                    _apply_broker(broker, res.resource_name, new)
            else:
                raise Failed(errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
        except Failed as exc:
            r.error_code, r.error_message = exc.code, exc.message
        except sb.StorageError as exc:
            r.error_code, r.error_message = storage_error_code(exc), str(exc)
    return R(throttle_time_ms=0, responses=out)


def _incremental(current: dict, configs, list_keys) -> dict:
    names = [c.name for c in configs]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise Failed(errors.INVALID_REQUEST, f"Error due to duplicate config keys : {', '.join(sorted(dupes))}")
    new = dict(current)
    for c in configs:
        op = c.config_operation
        if op == SET:
            if c.value is None:
                raise Failed(errors.INVALID_REQUEST, f"Null value not supported for : {c.name}")
            new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            if c.name not in list_keys:
                verb = "append" if op == APPEND else "subtract"
                raise Failed(errors.INVALID_CONFIG, f"Config value {verb} is not allowed for config key {c.name}")
            items = [v for v in (new.get(c.name) or list_keys[c.name] or "").split(",") if v]
            given = [v for v in (c.value or "").split(",") if v]
            if op == APPEND:
                items += [v for v in given if v not in items]
            else:
                items = [v for v in items if v not in given]
            new[c.name] = ",".join(items)
        else:
            raise Failed(errors.INVALID_REQUEST, f"Unknown config operation {op}")
    return new


@handles("IncrementalAlterConfigs", 0, 1)
def incremental_alter_configs(broker, ctx, body):
    R = IncrementalAlterConfigsResponse
    out = []
    for res in body.resources:
        r = R.AlterConfigsResourceResponse(error_code=0, error_message=None, resource_type=res.resource_type,
                                           resource_name=res.resource_name)
        out.append(r)
        try:
            if res.resource_type == TOPIC:
                meta = find_topic(broker, res.resource_name)
                if meta is None:
                    raise Failed(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist")
                for c in res.configs:
                    if c.name not in C.TOPIC_CONFIGS:
                        raise Failed(errors.INVALID_CONFIG, f"Unknown topic config name: {c.name}")
                list_keys = {k: broker.config.topic_value(meta.configs, k) for k, d in C.TOPIC_CONFIGS.items()
                             if d.type == C.LIST}
                new = _incremental(meta.configs, res.configs, list_keys)
                _validate_topic_changes(new)
                if not body.validate_only:
                    _apply_topic(broker, res.resource_name, res.configs, new)
            elif res.resource_type == BROKER:
                _check_broker_resource(broker, res.resource_name)
                layer = broker.config.dynamic if res.resource_name else broker.config.dynamic_default
                list_keys = {k: broker.config.broker_value(k)[0] for k, d in C.BROKER_CONFIGS.items()
                             if d.type == C.LIST}
                new = _incremental(layer, res.configs, list_keys)
                _validate_broker_changes({k: v for k, v in new.items() if layer.get(k) != v})
                if not body.validate_only:
                    _apply_broker(broker, res.resource_name, new)
            elif res.resource_type == BROKER_LOGGER:
                _check_broker_resource(broker, res.resource_name)
                import logging

                for c in res.configs:
                    if c.config_operation == SET and c.value:
                        logging.getLogger(None if c.name == "root" else c.name).setLevel(c.value.upper())
            else:
                raise Failed(errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
        except Failed as exc:
            r.error_code, r.error_message = exc.code, exc.message
        except sb.StorageError as exc:
            r.error_code, r.error_message = storage_error_code(exc), str(exc)
        except ValueError as exc:
            r.error_code, r.error_message = errors.INVALID_CONFIG, str(exc)
    return R(throttle_time_ms=0, responses=out)
