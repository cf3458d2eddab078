"""Kernel limits a sandboxed program sets on itself before anything untrusted runs.

The hard limits equal the soft ones, so the code that runs afterwards can lower them but
never raise them (raising a hard limit needs CAP_SYS_RESOURCE in the host's namespace).
"""

import resource

MB = 1024 * 1024


def apply(limits: dict) -> list[str]:
    """Set CPU seconds, address space, file size, core size, open files and processes.

    Returns the limits that could not be set (each a short note), so the host can
    record them instead of assuming they hold.
    """
    notes = []
    wanted = [
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (resource.RLIMIT_AS, limits["memory_mb"] * MB, limits["memory_mb"] * MB),
        (resource.RLIMIT_FSIZE, limits["max_file_mb"] * MB, limits["max_file_mb"] * MB),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NOFILE, limits["max_open_files"], limits["max_open_files"]),
    ]
    if limits.get("nproc"):
        wanted.append((resource.RLIMIT_NPROC, limits["nproc"], limits["nproc"]))
    for name, soft, hard in wanted:
        try:
            resource.setrlimit(name, (soft, hard))
        except (ValueError, OSError) as exc:
            notes.append(f"setrlimit {name}: {exc}")
    return notes
