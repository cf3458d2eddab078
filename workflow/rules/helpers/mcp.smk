# The helpers of mcp.smk's rules: paths, input and param functions.

MCP_HOTPOTQA = os.path.join(config["data"]["dir"], "hotpotqa", "hotpot_dev_distractor.jsonl.gz")
MCP_TOOLRESPONSES = os.path.join(config["formats"]["data_dir"], "json.jsonl")


#: the servers of the mcp target: installed from PyPI into a venv, or from npm
MCP_PY_SERVERS = ["sqlite", "git"]
MCP_NPM_SERVERS = ["filesystem", "memory", "everything"]
MCP_SERVER_PATTERN = "|".join(MCP_PY_SERVERS + MCP_NPM_SERVERS)
#: the servers of the tuned experiment (rules mcp_tuned_*)
MCP_TUNED_SERVERS = ["sqlite", "git", "memory"]


def mcp_requirements(wildcards):
    """A Python server's pinned requirements (an npm server's version is in servers.py)."""
    if wildcards.server in MCP_PY_SERVERS:
        return [f"envs/mcp-server-{wildcards.server}.txt"]
    return []


def mcp_target(wildcards):
    """What the server serves: the database file, the repository (git, and a copy of it
    for filesystem), or nothing (memory keeps a graph file of each arm's own)."""
    if wildcards.server == "sqlite":
        return [paths_module.MCP_DATABASE]
    if wildcards.server in ("git", "filesystem"):
        return [paths_module.MCP_REPOSITORY]
    return []


def mcp_tuned_target(wildcards):
    """What the tuned experiment's server serves: the database, for git the project
    repository (a package with a few dozen commits: a coding agent's history to read),
    for memory a knowledge graph about that project (each arm writes to its own copy)."""
    if wildcards.server == "git":
        return [paths_module.MCP_PROJECT_REPOSITORY]
    if wildcards.server == "memory":
        return [paths_module.MCP_MEMORY_GRAPH]
    return mcp_target(wildcards)


def mcp_tuned_file(name):
    """A file of one server's tuned experiment (the {server} wildcard's folder)."""
    return f"{paths_module.MCP_TUNED_DIR}/{name}"


def mcp_tuned_servers():
    """The servers of mcp.servers the tuned experiment has a session generator for."""
    return [s for s in config["mcp"]["servers"] if s in MCP_TUNED_SERVERS]


def mcp_budgets():
    """The proxy arms for `tersetalk mcp-experiment run --budgets`: null is lossless."""
    return ",".join("null" if b is None else str(b) for b in config["mcp"]["budgets"])


#: the tuned-vs-default sessions (rules mcp_tuned_*): per server, this many training and
#: as many evaluation sessions (disjoint seeds) of this many steps. Long enough that the
#: read tools reach the tuner's 20 calls per endpoint over the training sessions; six
#: held-out sessions because single sessions' savings spread from 0 to 19%; kept
#: here, not in the config, until the config schema has an mcp.tuned section
MCP_TUNED = {"sessions": 6, "steps": 40}


def mcp_tuned_budget():
    """The tuned experiment's one proxy budget: the smallest of mcp.budgets (where
    overflow hints and retrievals count most), or null when every arm is lossless."""
    budgets = [b for b in config["mcp"]["budgets"] if b is not None]
    return str(min(budgets)) if budgets else "null"
