"""What a page shows a person, collected from an AppTest run, and which of it is still English.

Shown text: titles, headers, markdown, captions, alerts, every widget's label, help, placeholder and options, tab and
expander labels, metrics, table headers, and the charts' titles, axis names, legends, annotations and hover
templates. A string is untranslated if, after the user's text, token labels, numbers and the technical names the
Chinese lessons use too (Q, K, V, W_O, softmax, d_model, model names …) are taken out, English words remain.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from mha_core.analysis.coref.sentence import PROBE
from mha_core.teaching.examples import EXAMPLES

TECHNICAL = (  # names Chinese texts on attention write as they are
    r"W_?[QKVO]ᵀ?|[QKV]ᵀ?|QKᵀ|OV|QK|W|[qkvo]|b_[QKVO]|softmax|d_model|d_k|d_v|d_head|h|n|T|x|i|L|H|log|exp|tanh|"
    r"RoPE|ALiBi|GQA|MQA|MLP|FFN|SDPA|LSE|logsumexp|FLOPs?|GPU|CPU|CUDA|CSV|JSON|PNG|SVG|URL|UMAP|t-SNE|MDS|JS|UD|"
    r"GAP|CoNLL-U|EWT|BERT|GPT-?2?|Gemma|SmolLM2?|MiniLM|Llama|PyTorch|torch|transformers|Transformer|Chromium|nats?|"
    r"logits?|Vaswani|Clark|Xiao|Wu|Voita|Elhage|Olsson|Kobayashi|Jain|Wallace|Abnar|Zuidema|Vig|Belinkov|Meng|"
    r"ReLU|GELU|SiLU|LayerNorm|RMSNorm|QK-norm|KV|MHA|ID|id|nn|MultiheadAttention|Linear|safetensors|GGUF|"
    r"Hugging Face|top-?k|top|argmax|max|min|mean|std|cos|sin|Inf|NaN|nan|inf|ms|MB|GB|KB|s|px|p|et al|lm_head|"
    r"Language|English|python|Python|eager|fused|explicit|auto|math|flash|efficient|cudnn|sdpa|float32|float16|"
    r"bfloat16|fp32|fp16|bf16|tok|txt|tsv|conllu|jsonl|matmul|png|svg|csv|json|PCA|GQA|AttentionViz|Frobenius|"
    r"LayerNorm|ln|nn|numel|Kovaleva|Olsson|Voita|Nanda|Heimersheim|Meng|Wang|Kobayashi|nostalgebraist|Abnar|Zuidema|"
    r"Elhage|spaCy|jieba|umap-learn|scikit-learn|TSV|WSJ|Stanford|CoNLL-2012|dep2head|head2dep|obj|nmod:poss|dobj|"
    r"poss|Winograd|RMS|QK-norm|Jensen-Shannon|Jensen–Shannon|Lx Hy|UTF-8|UTF-16|rollout|logit lens|attention sink|"
    r"BERT-base|probs|batch|seq_len|Text|Pronoun|Pronoun-offset|A-offset|A-coref|B-offset|B-coref|"
    r"Universal Dependencies|AttentionViz|Inf|causal|Top-k|GSD|GSDSimp|UD Chinese GSDSimp|Chinese GSDSimp|OpenCC|"
    r"Chefer|Sundararajan|AOPC|ERASER|DeYoung"
)
TECHNICAL += r"|log-sum-exp|logsumexp|TXT|WAV|MP3|FLAC|OGG|M4A|WEBM|JPG|JPEG|WEBP|PNG"  # file types (uploaders)
# Longest first, so that "QK-norm" is one name rather than "QK" and an untranslated "norm".
TECHNICAL_RE = re.compile(r"(?<![A-Za-z_])(?:" + "|".join(sorted(TECHNICAL.split("|"), key=len, reverse=True))
                          + r")(?![A-Za-z_])")
ENV_OR_CODE_RE = re.compile(r"\$[A-Z_]+|`[^`]*`|%\{[^}]*\}|\S*\\?\.\S*/\S*|\b[a-z_]+\.[a-z_]+\b|\b[a-z]+_[a-z_]+\b|"
                            r"\[[A-Z]+\]|<[^>]*>|\w*_\w+|[\w-]+\.(?:tsv|txt|csv|json|conllu|png|svg)\b")
WORD_RE = re.compile(r"[A-Za-z]{2,}")
CHART_TEXT_KEYS = {"title", "text", "name", "hovertemplate", "ticktext"}


def plotly_texts(spec: str) -> list[str]:
    """Titles, axis names, legends, annotations and hover templates of a plotly chart (not its data)."""
    found = []

    def walk(node: object, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                if k not in ("x", "y", "z", "customdata", "bdata", "text") or key == "title":
                    walk(v, k)
                elif k == "text" and isinstance(v, str):
                    found.append(v)
        elif isinstance(node, list):
            for item in node:
                walk(item, key)
        elif isinstance(node, str) and key in CHART_TEXT_KEYS:
            found.append(node)

    walk(json.loads(spec))
    return found


def shown_texts(at: object) -> list[str]:
    """Every string the page shows a person (see the module's docstring)."""
    texts = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success"):
        texts += [e.value for e in at.get(kind)]
    for kind in ("button", "download_button", "checkbox", "toggle", "selectbox", "radio", "multiselect", "slider",
                 "select_slider", "text_area", "text_input", "number_input", "file_uploader", "tab", "expander",
                 "metric", "segmented_control", "pills", "color_picker", "date_input"):
        for element in at.get(kind):
            proto = element.proto
            texts += [getattr(proto, field, "") for field in ("label", "help", "placeholder")]
            texts += [str(o) for o in getattr(element, "options", ()) or ()]
            if kind == "metric":
                texts.append(proto.body)
    texts += uploader_texts(at)
    for chart in at.get("plotly_chart"):
        texts += plotly_texts(chart.proto.spec)
    for frame in at.dataframe:
        texts += [str(c) for c in frame.value.columns]
    return [t for t in texts if isinstance(t, str) and t.strip()]


def uploader_texts(at: object) -> list[str]:
    """What each file uploader draws itself: Streamlit's button and limit, in English whatever the page's language
    ("Upload", "20MB per file • TXT"), unless the page's CSS for that uploader's key puts texts after them
    (views/_uploads.uploader_words): then those."""
    styles = " ".join(element.proto.body for element in at.get("html"))
    texts = []
    for uploader in at.get("file_uploader"):
        proto = uploader.proto
        key = proto.id.split("-", 2)[-1]  # "$$ID-<hash>-<the widget's key>"
        replaced = re.findall(rf"\.st-key-{re.escape(key)} [^{{}}]*::after\{{content:\"([^\"]*)\"", styles)
        types = ", ".join(t.lstrip(".").upper() for t in proto.type)
        texts += replaced if len(replaced) == 2 else ["Upload", f"{proto.max_upload_size_mb}MB per file • {types}"]
    return texts


QUOTED_RE = re.compile(r"“[^”]*”|‘[^’]*’|'[^']*'|\*[^*]*\*")  # a token, a title, the sentence: user text or a name
CODE_RE = re.compile(r"\w+=\w+|\w*\([^()]*(?:\([^()]*\)[^()]*)*\)\)?")  # bias=True, sum(p.numel() for p in …)


def english_left(text: str, user_texts: Iterable[str]) -> str:
    """What is left of `text` that should have been translated ('' if nothing)."""
    if re.fullmatch(r"\d+: .*", text, flags=re.S):  # a token choice ("3: it"): the user's text, as pieces
        return ""
    text = text.replace("\\", "")  # markdown escapes (literal()): gemma\-3 is gemma-3
    if any(len(user) > 20 and text.startswith(user) for user in user_texts):
        return ""  # the user's sentence and what the model wrote after it (the Continue tab)
    for user in sorted(user_texts, key=len, reverse=True):
        if len(user) > 1:  # whole words only: the sentence's "it" leaves "explicit" alone
            text = re.sub(rf"(?<![A-Za-z]){re.escape(user)}(?![A-Za-z])", " ", text)
    text = re.sub(r"https?://\S+", " ", text)
    if any("\u4e00" <= c <= "\u9fff" for c in text):  # in a Chinese sentence: quoted words and code are names
        text = CODE_RE.sub(" ", QUOTED_RE.sub(" ", text))
    text = ENV_OR_CODE_RE.sub(" ", text)
    text = TECHNICAL_RE.sub(" ", text)
    return " ".join(WORD_RE.findall(text))


def untranslated(at: object, user_texts: Iterable[str]) -> dict[str, str]:
    """Shown strings with English left in them -> the English left."""
    users = list(user_texts)
    left = {text: english_left(text, users) for text in shown_texts(at)}
    return {text: words for text, words in left.items() if words}


# Every page and its tabs in Chinese (tests/test_i18n.py on each bundled text model).
PAGES_AND_TABS = {  # page: (its tabs' URL key, the English tab labels)
    "views/heads.py": ("view", ("One head", "One layer", "One token", "Export")),
    "views/roles.py": (None, ()),
    "views/coreference.py": (None, ()),
    "views/contributions.py": ("c_tab", ("Value-weighted", "Rollout", "Ablation")),
    "views/predictions.py": ("p_tab", ("Next piece", "Fill the mask", "Logit lens", "Attribution", "Patching",
                                       "Continue")),
    "views/corpus.py": (None, ()),
    "views/parameters.py": ("ptab", ("This model", "Any shape", "Head weight norms")),
    "views/walkthrough.py": ("wt_tab", ("Walkthrough", "Lessons")),
    "views/explanations.py": (None, ()),
}


# Text a model reads, not text a person reads: the examples (offered in English on models that read no Chinese) and
# the English probes that continue an English sentence.
EXAMPLE_TEXTS = [example.text for example in EXAMPLES] + [PROBE.format(pronoun=p).strip() for p in ("it", "she")]


# The Contributions page ablates every head with the whole vocabulary's logits at every position (Gemma's 262,144):
# its Chinese is checked on a short sentence, a quarter of the default's pieces and of its time.
SHORT = {"views/contributions.py": {"text": "猫在睡觉，因为它累了。"}}


def chinese_runs(page: str, model: str) -> list:
    """The page in Chinese on `model`, once per tab (tabs bound to the URL open by their Chinese label)."""
    from mha_core import i18n
    from tests.conftest import open_app

    key, tabs = PAGES_AND_TABS[page]
    query = SHORT.get(page, {})
    runs = [open_app(page, lang="zh", model=model, **query)]  # its first tab open
    shown = {tab.label for tab in runs[0].tabs}
    for label in (i18n.catalogue("zh").gettext(t) for t in tabs[1:]):
        if label in shown:
            runs.append(open_app(page, lang="zh", model=model, **query, **{key: label}))
    return runs


def assert_no_english_left(at: object, page: str, model: str) -> None:
    """One run of a page in Chinese: no exception, and no English left but the user's text and the model names."""
    from mha_core.serving.menu import available_models

    names = [c.name for c in available_models()]
    assert not at.exception, (page, model, [e.value for e in at.exception])
    # The user's text: the sentence (an English example where the model reads no Chinese), and its words as tokens,
    # options and chart labels show them.
    sentences = [box.value for box in at.text_area] + [box.value for box in at.text_input] + EXAMPLE_TEXTS
    left = untranslated(at, names + sentences + [w for s in sentences for w in re.findall(r"[A-Za-z]+", s)])
    assert not left, (page, model, list(left.items())[:5])


def assert_all_chinese(page: str, model: str) -> list:
    """The page's runs in Chinese on `model` (chinese_runs), each with no English left but the user's text (tests
    whose English runs compute what the Chinese ones show call it too, in the same test: one computation, held by
    the process's server, for both)."""
    runs = chinese_runs(page, model)
    for at in runs:
        assert_no_english_left(at, page, model)
    return runs
