"""Sample photos for the Images page: scikit-image's data images (its wheel ships them as files; the package is
installed without its dependencies and never imported), each with its licence as scikit-image states it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mha_core.engine.loading.bundled import package_file
from mha_core.messages import N_


@dataclass(frozen=True)
class Photo:
    key: str
    file: str  # under skimage/data/
    title: str  # marked for the catalogue
    licence: str  # as scikit-image gives it (marked)
    author: str  # the photographer, or who released it


PUBLIC_DOMAIN, CC0 = N_("public domain"), N_("CC0")
PHOTOS = (
    Photo("chelsea", "chelsea.png", N_("a cat (Chelsea)"), CC0, "Stéfan van der Walt"),
    Photo("astronaut", "astronaut.png", N_("an astronaut (Eileen Collins)"), PUBLIC_DOMAIN, "NASA"),
    Photo("coffee", "coffee.png", N_("a cup of coffee"), CC0, "Rachel Michetti"),
    Photo("rocket", "rocket.jpg", N_("a rocket launch (DSCOVR on Falcon 9)"), PUBLIC_DOMAIN, "SpaceX"),
    Photo("camera", "camera.png", N_("a photographer"), CC0, "Lav Varshney"),
)


def photo_file(photo: Photo) -> Path | None:
    """The photo's file, None when scikit-image is not installed."""
    return package_file("skimage", f"data/{photo.file}")


def available_photos() -> tuple[Photo, ...]:
    return tuple(photo for photo in PHOTOS if photo_file(photo) is not None)
