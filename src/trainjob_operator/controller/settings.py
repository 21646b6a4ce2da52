"""The operator's settings: the config file, then the flags of `run` over it (a flag given wins), validated once;
and the start-up plan they imply."""

import argparse

from .. import config as config_module
from ..config import OperatorConfig
from ..runtime import startup


def plan_of(cfg: OperatorConfig) -> startup.Plan:
    return startup.Plan(
        operator_namespace=cfg.operator_namespace,
        namespaces=tuple(cfg.namespaces),
        webhooks=cfg.webhook.enabled,
        leader_election=cfg.leader_election.enabled,
        status_server=cfg.status_server.enabled,
        lease_name=cfg.leader_election.lease_name,
        cert_secret_name=cfg.webhook.cert_secret_name,
        webhook_configurations=(cfg.webhook.validating_name, cfg.webhook.mutating_name),
        streaming_lists=cfg.client.streaming_lists == "auto",
        metrics_auth=cfg.metrics.auth.enabled,
    )


def settings_from(args: argparse.Namespace) -> OperatorConfig:
    cfg = config_module.load(args.config)
    if args.namespace:
        cfg.namespaces = args.namespace
    if args.log_format:
        cfg.log_format = args.log_format
    if args.log_level:
        cfg.log_level = args.log_level
    if args.health_port is not None:
        cfg.health.port = args.health_port
    if args.webhook_port is not None:
        cfg.webhook.port = args.webhook_port
    if args.no_webhooks:
        cfg.webhook.enabled = False
    if args.status_port is not None:
        cfg.status_server.port = args.status_port
    if args.no_status_server:
        cfg.status_server.enabled = False
    if args.no_leader_election:
        cfg.leader_election.enabled = False
    if args.qps is not None:
        cfg.client.qps = args.qps
    if args.burst is not None:
        cfg.client.burst = args.burst
    if args.streaming_lists:
        cfg.client.streaming_lists = args.streaming_lists
    if args.concurrency is not None:
        cfg.concurrency = args.concurrency
    if args.operator_namespace:
        cfg.operator_namespace = args.operator_namespace
    return OperatorConfig.model_validate(cfg.model_dump())


__all__ = ["plan_of", "settings_from"]
