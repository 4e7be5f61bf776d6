"""Sample translations of plain sentences through a real server's ``POST /translate``, one or more bundles side by side.

    python -m bench samples [--bundle models/en-de [--bundle OTHER ...]] [--set help|everyday]
                            [--out docs/reports/samples/SET.md]

Starts ``python -m service`` on each bundle (127.0.0.1, a free port, default settings), sends the set's
sentences in one request, prints a markdown table (a column per bundle) and, with ``--out``, writes it. The
sentences were written for this table (not taken from any corpus). ``help``: ordinary instructions and messages
of the kind found in software help, the model's home ground, and a few sentences of documentation prose.
``everyday`` (written in session 50, before the model trained on FreeDict's examples was scored): what people
type into a translator first, outside software: weather, travel, shopping, family.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import httpx

from bench.loadtools import default_bundle, server_process

EVERYDAY = [
    "The weather is nice today.",
    "How much does the ticket cost?",
    "Where is the train station?",
    "I would like a cup of coffee, please.",
    "My brother lives in Berlin with his wife.",
    "We are going to the cinema tonight.",
    "Can you help me, please?",
    "The children are playing in the garden.",
    "I'm sorry, I don't understand.",
    "What time does the shop close?",
    "It was raining all day yesterday.",
    "She bought a new car last week.",
    "Thank you very much for your help.",
    "The soup is too hot.",
]

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
    p.add_argument(
        "--bundle", type=Path, action="append", default=None, help="bundle, repeatable (default: models/en-de)"
    )
    p.add_argument("--set", choices=("help", "everyday"), default="help", help="which sentences (default: help)")
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = p.parse_args(argv)
    sentences = SENTENCES if args.set == "help" else EVERYDAY
    columns: list[tuple[Path, str, list[str]]] = []
    for bundle in args.bundle or [default_bundle()]:
        with tempfile.TemporaryDirectory() as tmp, server_process(bundle, Path(tmp) / "server.log") as server:
            response = httpx.post(f"{server.url}/translate", json={"text": sentences}, timeout=120)
            response.raise_for_status()
            body = response.json()
        model = f"{body['model']['name']} {body['model']['version']}"
        columns.append((bundle, model, [item["text"] for item in body["translations"]]))
    heads = [model for _, model, _ in columns] if len(columns) > 1 else ["the model's German"]
    rows = ["| English | " + " | ".join(heads) + " |", "|---|" + "---|" * len(columns)]
    for i, source in enumerate(sentences):
        rows.append(f"| {source} | " + " | ".join(texts[i] for _, _, texts in columns) + " |")
    table = "\n".join(rows) + "\n"
    print(table, end="")
    if args.out:
        named = ", ".join(f"{bundle} ({model})" for bundle, model, _ in columns)
        args.out.write_text(f"`python -m bench samples --set {args.set}` on {named}:\n\n{table}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
