"""Sample translations of plain help-style sentences through a real server's ``POST /translate``.

    python -m bench samples [--bundle models/en-de] [--out docs/default-model-samples.md]

Starts ``python -m service`` on the bundle (127.0.0.1, a free port, default settings), sends the
sentences below in one request, prints a markdown table and, with ``--out``, writes it. The sentences
were written for this table (not taken from any corpus): ordinary instructions and messages of the kind
found in software help, the model's home ground, and a few sentences of documentation prose, its weak spot.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import httpx

from bench.loadtools import default_bundle, server_process

SENTENCES = [
    "Click the Save button to store your changes.",
    "Open the file.",
    "Close the window.",
    "The file could not be saved because the disk is full.",
    "Select the text you want to format and choose Format - Character.",
    "Do you want to delete this folder?",
    "Enter your password.",
    "The printer is not connected.",
    "You can change the language in the settings.",
    "This command inserts a new table into the document.",
    # documentation prose, the model's weak spot
    "If the file does not exist, it is created.",
    "This option prints the number of lines in each file.",
    "To change the background, open the settings and choose another picture.",
    "The changes take effect after you restart the computer.",
]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bundle", type=Path, default=None, help="bundle directory (default: models/en-de)")
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = p.parse_args(argv)
    bundle = args.bundle or default_bundle()
    with tempfile.TemporaryDirectory() as tmp, server_process(bundle, Path(tmp) / "server.log") as server:
        response = httpx.post(f"{server.url}/translate", json={"text": SENTENCES}, timeout=120)
        response.raise_for_status()
        body = response.json()
    rows = ["| English | the model's German |", "|---|---|"]
    for source, item in zip(SENTENCES, body["translations"], strict=True):
        rows.append(f"| {source} | {item['text']} |")
    table = "\n".join(rows) + "\n"
    print(table, end="")
    if args.out:
        model = f"{body['model']['name']} {body['model']['version']}"
        args.out.write_text(f"`python -m bench samples` on {bundle} ({model}):\n\n{table}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
