"""Request bodies and queries shared by the sync and async clients, checked
before anything is sent."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple

from . import _check, _lifecycle
from ._convert import format_time
from .types import NetworkPolicy, Resources


def network_json(value: Any, name: str = "network") -> Dict[str, Any]:
    """A NetworkPolicy, a dict of its fields or a mode alone, as JSON."""
    if isinstance(value, str):
        return {"mode": _check.choice(name, value, _check.NETWORK_MODES)}
    if isinstance(value, NetworkPolicy):
        value = value.to_json()
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mode (str), a NetworkPolicy or a dict, not {type(value).__name__}")
    unknown = set(value) - {"mode", "allow", "deny"}
    if unknown:
        raise ValueError(f"{name}: unknown field(s) {', '.join(sorted(unknown))} (want mode, allow, deny)")
    out: Dict[str, Any] = {"mode": _check.choice(name + ".mode", value.get("mode") or "off", _check.NETWORK_MODES)}
    for k in ("allow", "deny"):
        v = _check.str_list(f"{name}.{k}", value.get(k))
        if v:
            out[k] = v
    return out


def resources_json(value: Any) -> Dict[str, Any]:
    if isinstance(value, Resources):
        value = value.to_json()
    if not isinstance(value, Mapping):
        raise TypeError(f"resources must be a Resources or a dict, not {type(value).__name__}")
    unknown = set(value) - {"vcpus", "memory_mib", "disk_mib", "pids"}
    if unknown:
        raise ValueError(f"resources: unknown field(s) {', '.join(sorted(unknown))} (want vcpus, memory_mib, disk_mib, pids)")
    out: Dict[str, Any] = {}
    if value.get("vcpus") is not None:
        out["vcpus"] = _check.number("resources.vcpus", value["vcpus"])
    for k in ("memory_mib", "disk_mib", "pids"):
        if value.get(k) is not None:
            out[k] = _check.integer("resources." + k, value[k])
    return {k: v for k, v in out.items() if v}


def create_json(
    template: Any,
    *,
    timeout: Any,
    env: Any,
    metadata: Any,
    resources: Any,
    network: Any,
    secrets: Any,
    on_timeout: Any,
    max_cost_micros: Any,
    idle_timeout: Any = None,
    on_idle: Any = None,
    auto_resume: Any = None,
    idle_counts_processes: Any = None,
) -> Dict[str, Any]:
    """The body of POST /v1/sandboxes."""
    body: Dict[str, Any] = {}
    if template is not None:
        body["template"] = _check.string("template", template)
    t = _check.number("timeout", timeout, minimum=1)
    if t is not None:
        body["timeout_seconds"] = int(math.ceil(t))
    for k, v in (("env", env), ("metadata", metadata)):
        m = _check.str_map(k, v)
        if m:
            body[k] = m
    if resources is not None:
        r = resources_json(resources)
        if r:
            body["resources"] = r
    if network is not None:
        body["network"] = network_json(network)
    s = _check.str_list("secrets", secrets)
    if s:
        body["secrets"] = s
    o = _check.choice("on_timeout", on_timeout, _check.ON_TIMEOUT)
    if o:
        body["on_timeout"] = o
    m = _check.integer("max_cost_micros", max_cost_micros, minimum=1)
    if m:
        body["max_cost_micros"] = m
    body.update(_lifecycle.idle_json(idle_timeout, on_idle, auto_resume, idle_counts_processes))
    return body


def secret_json(name: Any, value: Any, hosts: Any) -> Dict[str, Any]:
    h = _check.str_list("hosts", hosts)
    if not h:
        raise ValueError("hosts must name at least one host the secret may be sent to")
    return {"name": _check.string("name", name), "value": _check.string("value", value), "hosts": h}


def usage_query(since: Any, until: Any) -> List[Tuple[str, str]]:
    q = []
    for k, v in (("from", since), ("to", until)):
        if v is None:
            continue
        if not isinstance(v, datetime):
            raise TypeError(f"{'since' if k == 'from' else 'until'} must be a datetime, not {type(v).__name__}")
        q.append((k, format_time(v)))
    return q


_TEMPLATE_KEYS = {
    "name", "from_", "from", "recipe", "dockerfile", "context", "build_args", "resources",
    "step_timeout_seconds", "no_cache", "network",
}


def template_json(name: Any, spec: Mapping[str, Any]) -> Dict[str, Any]:
    """The body of POST /v1/templates from keyword arguments."""
    unknown = set(spec) - _TEMPLATE_KEYS
    if unknown:
        raise TypeError(f"unknown template option(s): {', '.join(sorted(unknown))}")
    body: Dict[str, Any] = {"name": _check.string("name", name)}
    src = spec.get("from_", spec.get("from"))
    if src is not None:
        if isinstance(src, str):
            src = {"image": src}
        if not isinstance(src, Mapping):
            raise TypeError(f"from_ must be an image reference (str) or a dict, not {type(src).__name__}")
        body["from"] = dict(src)
    if spec.get("recipe") is not None:
        r = spec["recipe"]
        if not isinstance(r, Mapping):
            raise TypeError(f"recipe must be a dict, not {type(r).__name__}")
        body["recipe"] = dict(r)
    if spec.get("dockerfile") is not None:
        body["dockerfile"] = _check.string("dockerfile", spec["dockerfile"])
    for k in ("context", "build_args"):
        m = _check.str_map(k, spec.get(k))
        if m:
            body[k] = m
    if spec.get("resources") is not None:
        body["resources"] = resources_json(spec["resources"])
    st = _check.integer("step_timeout_seconds", spec.get("step_timeout_seconds"), minimum=1)
    if st:
        body["step_timeout_seconds"] = st
    if spec.get("no_cache"):
        body["no_cache"] = True
    if spec.get("network") is not None:
        body["network"] = network_json(spec["network"])
    return body


def mode_str(mode: Any) -> Optional[str]:
    if mode is None:
        return None
    if isinstance(mode, str):
        if not mode or any(c not in "01234567" for c in mode) or len(mode) > 4:
            raise ValueError(f"mode must be octal permission bits like '0644', got {mode!r}")
        return mode
    if isinstance(mode, bool) or not isinstance(mode, int):
        raise TypeError(f"mode must be an int (0o644) or an octal str, not {type(mode).__name__}")
    if not 0 <= mode <= 0o7777:
        raise ValueError(f"mode must be between 0 and 0o7777, got {oct(mode)}")
    return "%04o" % mode
