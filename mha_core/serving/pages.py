"""The app's pages, each declared once: its file under views/, its title (marked for the catalogue), its icon, what
it reads (the inputs its visitor gives, and how it reads an encoder–decoder). The navigation (views/_visit.py), the
menu's refusals (menu.page_model) and the lesson's links (teaching/lesson.py names a page by its name) come from here;
tests/test_pages.py holds the declarations and the files under views/ to each other."""

from __future__ import annotations

from dataclasses import dataclass

from mha_core.engine.loading.bundled import VISION_NAME, WHISPER_NAME
from mha_core.messages import N_

# What a page's visitor gives it.
TEXT = "text"  # a sentence (the sentence box)
PAIR = "pair"  # a minimal pair: a second sentence beside the first
LONG = "long"  # a long text or an uploaded corpus
AUDIO = "audio"  # a recording (spoken, uploaded or from the microphone)
IMAGE = "image"  # a photo
WEIGHTS = "weights"  # nothing but the model: the page reads its weights (any model, images' too)

# How a page reads an encoder–decoder.
ENCODER_ALONE = "encoder"  # its encoder alone, reading a sentence's pieces (one that hears audio is refused)
KINDS = "kinds"  # a picker for its three kinds of attention (views/_stacks.py): whole, unless the text's encoder
WHOLE = "whole"  # all of it: its parameters, what its decoder writes, what it hears


@dataclass(frozen=True)
class Page:
    """One page of the app."""

    name: str  # its file, views/{name}.py, and the path of its address
    title: str  # N_-marked: translated where it is shown
    icon: str
    reads: tuple[str, ...]  # TEXT, PAIR, LONG, AUDIO, IMAGE, WEIGHTS
    encoder_decoder: str = ENCODER_ALONE  # ENCODER_ALONE, KINDS or WHOLE
    opens_on: str | None = None  # the bundled model it opens with where listed, unless the visitor chose one

    @property
    def path(self) -> str:
        """Its file, from the app's folder (what st.Page and st.page_link take)."""
        return f"views/{self.name}.py"

    @property
    def reads_images(self) -> bool:
        """Whether it reads an image model (a Vision Transformer): its photos, or its weights."""
        return IMAGE in self.reads or WEIGHTS in self.reads

    @property
    def reads_audio_models(self) -> bool:
        """Whether it reads an encoder that hears audio (Whisper's): only with its decoder."""
        return self.encoder_decoder != ENCODER_ALONE


HEADS = Page("heads", N_("Heads"), ":material/grid_view:", (TEXT, PAIR, LONG), KINDS)
LESSON = Page("lesson", N_("Lesson"), ":material/co_present:", (TEXT,))
ROLES = Page("roles", N_("Roles"), ":material/label:", (TEXT, PAIR, LONG), KINDS)
COREFERENCE = Page("coreference", N_("Coreference"), ":material/link:", (TEXT, PAIR))
CONTRIBUTIONS = Page("contributions", N_("Contributions"), ":material/bolt:", (TEXT,))
EXPLANATIONS = Page("explanations", N_("Explanations"), ":material/psychology_alt:", (TEXT,))
PREDICTIONS = Page("predictions", N_("Predictions"), ":material/trending_up:", (TEXT,), WHOLE)
CORPUS = Page("corpus", N_("Across a corpus"), ":material/scatter_plot:", (LONG,))
PARAMETERS = Page("parameters", N_("Parameters"), ":material/calculate:", (WEIGHTS,), WHOLE)
EFFICIENCY = Page("efficiency", N_("Efficiency"), ":material/speed:", (TEXT,))
WALKTHROUGH = Page("walkthrough", N_("Walkthrough"), ":material/school:", (TEXT, IMAGE), KINDS)
SEQ2SEQ = Page("seq2seq", N_("Encoder–decoder"), ":material/translate:", (AUDIO, TEXT), WHOLE,
               WHISPER_NAME)
TRANSLATION = Page("translation", N_("Translation"), ":material/g_translate:", (TEXT, PAIR))
IMAGES = Page("images", N_("Images"), ":material/image:", (IMAGE,), opens_on=VISION_NAME)

PAGES = (HEADS, LESSON, ROLES, COREFERENCE, CONTRIBUTIONS, EXPLANATIONS, PREDICTIONS, CORPUS, PARAMETERS, EFFICIENCY,
         WALKTHROUGH, SEQ2SEQ, TRANSLATION, IMAGES)  # in the navigation's order; the first is the default
BY_NAME = {page.name: page for page in PAGES}


def page_at(url_path: str | None) -> Page | None:
    """The page an address's path shows ("" is the default page's, the first), None for another path."""
    if url_path == "":
        return PAGES[0]
    return BY_NAME.get(url_path or "")
