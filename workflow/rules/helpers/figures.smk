# The helpers of figures.smk's rules: target lists, input and param functions.

from snakemake.io import report as report_file  # `report(` opens a directive here

from tersetalk.pipeline.config import ablation_values
from tersetalk.pipeline.schedule import system_tasks

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


def drawn_ablations():
    """The ablations that have a figure: defined and run on at least one task."""
    return [name for name in config["ablations"] if ablation_target(name)]


def ablation_figures():
    """plot_ablations' outputs: each drawn ablation's PNG (in the report, under its own
    subcategory) and PDF."""
    return [
        (
            report_file(
                png, caption="../report/ablation.rst", category="Ablations", subcategory=name
            )
            if png.endswith(".png")
            else png
        )
        for name in drawn_ablations()
        for png in ablation_target(name)
    ]


def ablations_json():
    """What `tersetalk plot-ablations --ablations-json` draws: each ablation's system,
    setting, variants in order and x values."""
    return json.dumps(
        {
            name: {
                "system": config["ablations"][name]["system"],
                "setting": config["ablations"][name]["setting"],
                "variants": list(config["ablations"][name]["variants"]),
                "values": ablation_values(config, name),
            }
            for name in drawn_ablations()
        }
    )


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


def ablation_triples():
    """(task, system, variant) of the variants of every drawn ablation on every task its
    system runs on, each once, in config order."""
    found = {}
    for name in drawn_ablations():
        spec = config["ablations"][name]
        for task in system_tasks(config, spec["system"]):
            for variant in spec["variants"]:
                found[(task, spec["system"], variant)] = None
    return list(found)


def ablation_files(template):
    """``template`` (SCORES or METRICS) for each run of :func:`ablation_triples`."""
    return [template.format(task=t, system=s, variant=v) for t, s, v in ablation_triples()]
