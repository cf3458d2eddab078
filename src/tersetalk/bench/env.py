"""The environment a measurement was taken in, as columns of every result row."""

from __future__ import annotations

import datetime as dt
import os
import platform
from functools import lru_cache
from importlib import metadata

_PACKAGES = (
    "tersetalk", "orjson", "msgspec", "msgpack", "protobuf", "pydantic", "pydantic-core", "pandas"
)  # fmt: skip


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what platform knows)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


@lru_cache(maxsize=1)
def environment() -> dict[str, str | int | float]:
    """``env_*`` columns: CPU, cores, Python, OS and the versions of the measured libraries."""
    try:
        from google.protobuf.internal import api_implementation

        pb_impl = api_implementation.Type()
    except ImportError:
        pb_impl = "absent"
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count() or 0
    env: dict[str, str | int | float] = {
        "env_cpu": cpu_model(),
        "env_cpus_usable": affinity,
        "env_python": f"{platform.python_implementation()} {platform.python_version()}",
        "env_platform": platform.platform(terse=True),
        "env_protobuf_backend": pb_impl,
        "env_measured_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        # other load on a shared machine slows every method alike, but it is worth knowing
        "env_loadavg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else -1.0,
    }
    for package in _PACKAGES:
        env[f"env_{package.replace('-', '_')}"] = _version(package)
    return env


def describe(env: dict[str, str | int | float]) -> str:
    """One line for logs."""
    names = {p.replace("-", "_") for p in _PACKAGES}
    libs = ", ".join(f"{k[4:]} {v}" for k, v in env.items() if k[4:] in names)
    return (
        f"{env['env_cpu']} ({env['env_cpus_usable']} usable CPUs), {env['env_python']}, "
        f"{env['env_platform']}; {libs}; protobuf backend {env['env_protobuf_backend']}; "
        f"load average {env['env_loadavg_1m']}"
    )
