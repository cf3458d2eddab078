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


#: the tuned-vs-default sessions (rules mcp_tuned_*): per server, this many training and
#: as many evaluation sessions (disjoint seeds) of this many steps. Long enough that the
#: read tools reach the tuner's 20 calls per endpoint over the training sessions; kept
#: here, not in the config, until the config schema has an mcp.tuned section
MCP_TUNED = {"sessions": 4, "steps": 40}


def mcp_tuned_budget():
    """The tuned experiment's one proxy budget: the smallest of mcp.budgets (where
    overflow hints and retrievals count most), or null when every arm is lossless."""
    budgets = [b for b in config["mcp"]["budgets"] if b is not None]
    return str(min(budgets)) if budgets else "null"
