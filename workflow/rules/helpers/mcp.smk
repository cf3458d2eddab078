# The helpers of mcp.smk's rules: paths, input and param functions.

#: the servers' venvs, beside their JSON; each is rebuilt only when its requirements
#: file changes (the tests build their own under $TERSETALK_MCP_ENVS)
MCP_ENV_DIR = "results/mcp/envs"
MCP_HOTPOTQA = os.path.join(config["data"]["dir"], "hotpotqa", "hotpot_dev_distractor.jsonl.gz")
MCP_TOOLRESPONSES = os.path.join(config["formats"]["data_dir"], "json.jsonl")


def mcp_target(wildcards):
    """What the server serves: the database file or the repository."""
    if wildcards.server == "sqlite":
        return "results/mcp/data/questions.sqlite"
    return "results/mcp/data/repo"


def mcp_budgets():
    """The proxy arms for `tersetalk mcp-experiment run --budgets`: null is lossless."""
    return ",".join("null" if b is None else str(b) for b in config["mcp"]["budgets"])
