#!/usr/bin/env bash
# Run by Snakemake inside the new conda environment, from the directory Snakemake was
# started in (the repository root): install tersetalk and its pinned dependencies the
# same way as the README's pip install.
set -euo pipefail
if ! grep -qs '^name = "tersetalk"' pyproject.toml; then
    echo "tersetalk post-deploy: run snakemake from the tersetalk repository root" \
        "(no tersetalk pyproject.toml in $(pwd))" >&2
    exit 1
fi
python -m pip install -c constraints.txt -e '.[workflow]'
