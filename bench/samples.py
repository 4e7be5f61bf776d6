"""Sample translations of plain sentences through a real server's ``POST /translate``, one or more bundles side by side.

    python -m bench samples [--bundle models/en-de [--bundle OTHER ...]] [--set help|everyday]
                            [--out docs/reports/samples/SET.md]

Starts ``python -m service`` on each bundle (127.0.0.1, a free port, default settings), sends the set's
sentences in one request, prints a markdown table (a column per bundle) and, with ``--out``, writes it. The
sentences were written for this table (not taken from any corpus). ``help``: ordinary instructions and messages
of the kind found in software help, the model's home ground, and a few sentences of documentation prose.
``everyday`` (written in session 50, before the model trained on FreeDict's examples was scored): what people
type into a translator first, outside software: weather, travel, shopping, family. A bundle from German
(``models/de-en``) gets each set in German (written in session 52, before de→en 0.7.0 was scored, as translations
of the English sentences, which the table shows beside them); every bundle of one run must translate from the
same language.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import httpx

from bench.loadtools import default_bundle, server_process
from core.bundle import read_manifest

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

EVERYDAY_DE = [
    "Das Wetter ist heute schön.",
    "Wie viel kostet die Fahrkarte?",
    "Wo ist der Bahnhof?",
    "Ich hätte gern eine Tasse Kaffee, bitte.",
    "Mein Bruder wohnt mit seiner Frau in Berlin.",
    "Wir gehen heute Abend ins Kino.",
    "Können Sie mir bitte helfen?",
    "Die Kinder spielen im Garten.",
    "Entschuldigung, ich verstehe das nicht.",
    "Wann schließt der Laden?",
    "Gestern hat es den ganzen Tag geregnet.",
    "Sie hat letzte Woche ein neues Auto gekauft.",
    "Vielen Dank für Ihre Hilfe.",
    "Die Suppe ist zu heiß.",
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

SENTENCES_DE = [
    "Klicken Sie auf die Schaltfläche Speichern, um Ihre Änderungen zu speichern.",
    "Öffnen Sie die Datei.",
    "Schließen Sie das Fenster.",
    "Die Datei konnte nicht gespeichert werden, weil die Festplatte voll ist.",
    "Markieren Sie den Text, den Sie formatieren möchten, und wählen Sie Format - Zeichen.",
    "Möchten Sie diesen Ordner löschen?",
    "Geben Sie Ihr Passwort ein.",
    "Der Drucker ist nicht angeschlossen.",
    "Sie können die Sprache in den Einstellungen ändern.",
    "Dieser Befehl fügt eine neue Tabelle in das Dokument ein.",
    "Wenn die Datei nicht existiert, wird sie erstellt.",
    "Diese Option gibt die Anzahl der Zeilen in jeder Datei aus.",
    "Um den Hintergrund zu ändern, öffnen Sie die Einstellungen und wählen Sie ein anderes Bild.",
    "Die Änderungen werden nach einem Neustart des Computers wirksam.",
]

# (set, source language) -> sentences; the German ones translate the English ones line for line
SETS = {
    ("help", "en"): SENTENCES,
    ("everyday", "en"): EVERYDAY,
    ("help", "de"): SENTENCES_DE,
    ("everyday", "de"): EVERYDAY_DE,
}
LANGUAGES = {"en": "English", "de": "German"}


def source_language(bundles: list[Path]) -> str:
    """The one language every bundle translates from (their manifests' ``source_language``)."""
    found = {read_manifest(bundle, verify=False)["source_language"] for bundle in bundles}
    if len(found) != 1 or not found <= LANGUAGES.keys():
        raise SystemExit(f"samples: the bundles must all translate from English or from German, not {sorted(found)}")
    return found.pop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--bundle", type=Path, action="append", default=None, help="bundle, repeatable (default: models/en-de)"
    )
    p.add_argument("--set", choices=("help", "everyday"), default="help", help="which sentences (default: help)")
    p.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    args = p.parse_args(argv)
    bundles = args.bundle or [default_bundle()]
    language = source_language(bundles)
    sentences = SETS[args.set, language]
    columns: list[tuple[Path, str, list[str]]] = []
    for bundle in bundles:
        with tempfile.TemporaryDirectory() as tmp, server_process(bundle, Path(tmp) / "server.log") as server:
            response = httpx.post(f"{server.url}/translate", json={"text": sentences}, timeout=120)
            response.raise_for_status()
            body = response.json()
        model = f"{body['model']['name']} {body['model']['version']}"
        columns.append((bundle, model, [item["text"] for item in body["translations"]]))
    heads = [model for _, model, _ in columns] if len(columns) > 1 else ["the model's translation"]
    cells = [texts for _, _, texts in columns]
    if language != "en":  # the English each German line translates
        heads.append("written from")
        cells.append(SETS[args.set, "en"])
    rows = [f"| {LANGUAGES[language]} | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads)]
    for i, source in enumerate(sentences):
        rows.append(f"| {source} | " + " | ".join(column[i] for column in cells) + " |")
    table = "\n".join(rows) + "\n"
    print(table, end="")
    if args.out:
        named = ", ".join(f"{bundle} ({model})" for bundle, model, _ in columns)
        args.out.write_text(f"`python -m bench samples --set {args.set}` on {named}:\n\n{table}", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
