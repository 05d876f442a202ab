"""Health, metrics and the broker's settings."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from broker.routes import Ctrl, JsonBody

router = APIRouter(tags=["ops"])


@router.get("/health")
async def health(ctrl: Ctrl) -> dict[str, Any]:
    cfg, rec = ctrl.config, ctrl.recovery
    return {
        "status": "ok" if ctrl.store.running else "stopping",
        "role": "broker",
        "broker_name": cfg.broker_name,
        "cluster": cfg.broker_cluster_name,
        "broker_id": cfg.broker_id,
        "addr": cfg.addr,
        "flush_disk_type": ctrl.store.config.flush_disk_type.value,
        "commit_log_max_offset": ctrl.store.commit_log.max_offset(),
        "disk_used_percent": round(ctrl.store.disk_used, 1),
        "disk_full": ctrl.store.disk_full,  # writes refused (disk_space_warning_level_ratio)
        "started_ms": ctrl.started_ms,
        "recovery": None if rec is None else {"abnormal": rec.abnormal},
        "registrations": ctrl.registrar.registrations,
        "ha": ctrl.ha_status(),
    }


@router.get("/metrics", response_class=Response)
async def prometheus(ctrl: Ctrl) -> Response:
    return Response(generate_latest(ctrl.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/config")
async def get_config(ctrl: Ctrl) -> dict[str, Any]:
    """Every setting as the broker runs with it (secrets masked)."""
    return ctrl.settings.get()


@router.put("/config", dependencies=[JsonBody])
async def update_config(ctrl: Ctrl, changes: dict[str, Any]) -> dict[str, Any]:
    """Change settings the broker reads where it uses them, until it stops
    (``{"auto_create_topic_enable": false}``); the others are refused (400)."""
    return ctrl.settings.update(changes)
