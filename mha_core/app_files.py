"""Where the web app's files are (app.py, views/, assets/, .streamlit/): the checkout mha_core sits in (make install's
editable install, PYTHONPATH, `streamlit run app.py`), or the data folder a wheel installed them in,
<prefix>/share/mha-explorer (pyproject.toml's data-files; `pip install --user`: under the user's base). The assets
mha_core reads (lessons, examples, the bundled corpora, the hand alignments) are found here too. A leaf: the standard
library only."""

from __future__ import annotations

import site
import sys
from pathlib import Path

NAME = "mha-explorer"
CHECKOUT = Path(__file__).resolve().parents[1]


def installed_dirs() -> tuple[Path, ...]:
    """Where pip puts a wheel's data files: the environment's prefix, then the user's base (`--user`)."""
    return tuple(Path(prefix) / "share" / NAME for prefix in (sys.prefix, site.getuserbase()))


def app_dir() -> Path:
    """The first folder holding app.py and assets/: the checkout, else the installed data folder. The checkout when
    neither has them (a file then missing says which path it looked for)."""
    for folder in (CHECKOUT, *installed_dirs()):
        if (folder / "app.py").is_file() and (folder / "assets").is_dir():
            return folder
    return CHECKOUT


ASSETS = app_dir() / "assets"
