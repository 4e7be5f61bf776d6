"""Games' story and dialogue catalogs: an opt-in group whose held-out catalogs go to test.games.tsv only, and whose
training pairs (like the dictionary's) are also written on their own, for a run to weight them up."""

from __future__ import annotations

from pathlib import Path

from testkit.corpus import catalog_pairs, check_group_added, held_out_pairs, say_it_pairs
from training.corpus.collect import resolve_sources
from training.corpus.sources import SOURCES, Pair
from training.corpus.split import assemble_corpus

GAMES = ("cataclysm-dda", "freedroidrpg", "naev", "warzone2100", "widelands")


def test_games_are_opt_in_gettext_sources_of_their_own_group() -> None:
    assert not set(GAMES) & set(resolve_sources(None))
    assert set(GAMES) <= set(resolve_sources(["all", "games"]))
    assert {(SOURCES[name].kind, SOURCES[name].group) for name in GAMES} == {("gettext", "games")}


def test_games_leave_the_other_sets_as_they_were_and_get_their_own_files(tmp_path: Path) -> None:
    ui = catalog_pairs()
    words = say_it_pairs()
    without = assemble_corpus(ui + words, seed=1)
    held = held_out_pairs(without)
    # a game repeats held-out strings in many catalogs: they stay held out, and do not turn "common"
    games = [Pair("naev", f"mission{u}.mo", p.en, f"{p.de} (Spiel)") for p in held[:20] for u in range(5)]
    games += [
        Pair("widelands", f"map{u}.mo", f"The river {u} floods on day {i}.", f"Der Fluss {u} tritt am Tag {i} über.")
        for u in range(80)
        for i in range(6)
    ]
    with_games = assemble_corpus(ui + words + games, seed=1)
    check_group_added(without, with_games, "games", "widelands", held, tmp_path)
    for group, sources in (("games", {"naev", "widelands"}), ("dictionary", {"freedict"})):
        expected = "".join(f"{p.en}\t{p.de}\n" for p in with_games.train if p.source in sources)
        assert expected and (tmp_path / f"train.{group}.tsv").read_text(encoding="utf-8") == expected
    assert not (tmp_path / "train.software-ui.tsv").exists()
