# The helpers of figures.smk's rules: target lists, input and param functions.

from tersetalk.config import ablation_values
from tersetalk.tasks.schedule import system_tasks

MAIN_FIGURES = ["quality_vs_tokens", "token_breakdown", "accuracy_by_length"]


def ablation_target(name):
    """The figure (PNG and PDF) of one ablation; nothing when the config does not define it
    or its system runs on none of the tasks."""
    if name not in config["ablations"]:
        return []
    if not system_tasks(config, config["ablations"][name]["system"]):
        return []
    return [paths.figure(f"ablation_{name}.{ext}") for ext in ("png", "pdf")]


def ablation_targets():
    return [path for name in config["ablations"] for path in ablation_target(name)]


def figure_targets():
    """Every figure of the paper: the main ones and one per configured ablation."""
    main = [paths.figure(f"{fig}.{ext}") for fig in MAIN_FIGURES for ext in ("png", "pdf")]
    return main + ablation_targets()


def table_targets():
    """The paper's tables (CSV and LaTeX) and the summary as CSV."""
    return [
        paths.results("tables/main.csv"),
        paths.results("tables/main.tex"),
        paths.results("stats/noninferiority.csv"),
        paths.results("stats/noninferiority.tex"),
        paths.results("tables/targets.csv"),
        paths.results("tables/targets.tex"),
        paths.results("summary.csv"),
    ]


def ablation_files(template):
    """``template`` (SCORES or METRICS) for one ablation's variants on every task its
    system runs on."""

    def files(wildcards):
        spec = config["ablations"][wildcards.ablation]
        return [
            template.format(task=task, system=spec["system"], variant=variant)
            for task in system_tasks(config, spec["system"])
            for variant in spec["variants"]
        ]

    return files
