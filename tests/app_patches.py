"""Streamlit's AppTest as the tests use it, patched once in each process that runs tests (tests/conftest.py's
set_up_test_process): the last run's media files kept for download(), and the components' scan done once."""

from __future__ import annotations

from functools import lru_cache

import streamlit.testing.v1.app_test as app_test
from streamlit.components.v2.component_manager import BidiComponentManager
from streamlit.runtime.media_file_manager import MediaFileManager


class KeptMediaFiles(MediaFileManager):
    """AppTest gives each run a media file manager on a stand-in runtime that it drops after the run: this one keeps
    the last, so a test can read what a download button holds (download)."""

    latest: MediaFileManager | None = None

    def __init__(self, storage: object) -> None:
        super().__init__(storage)
        KeptMediaFiles.latest = self


app_test.MediaFileManager = KeptMediaFiles


class ComponentsScannedOnce(BidiComponentManager):
    """Each new AppTest scanned every installed package's metadata for Streamlit components (about 0.4 s: 840
    packages, most of an AppTest of a small page); a server scans once at its start. The scan, once per test process,
    its registry shared by every AppTest."""

    def discover_and_register_components(self, *args: object, **kwargs: object) -> None:
        if not getattr(self, "scanned", False):
            super().discover_and_register_components(*args, **kwargs)
            self.scanned = True


app_test.BidiComponentManager = lru_cache(maxsize=1)(ComponentsScannedOnce)  # one instance, made at the first AppTest
