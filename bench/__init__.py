"""Benchmarks: ``python -m bench <command> [options]``; ``python -m bench`` lists the commands.

Each command prints a table and writes its report (md, json, sometimes png) under ``docs/reports/`` unless
``--out`` says otherwise. Figures are ratios measured side by side in one run: this machine is noisy.
"""
