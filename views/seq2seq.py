"""Encoder–decoder: the original Transformer's three kinds of attention. The encoder reads the source (a sentence, or
Whisper's spectrogram), the decoder writes the target one piece at a time, and each decoder layer's cross-attention
takes Q from the decoder and K, V from the encoder's output: where the decoder listens as it writes each piece."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from mha_core import LoadedModel, i18n
from mha_core.analysis.seq2seq.transcribe import MAX_WRITTEN, Transcript
from mha_core.figures import seq2seq as figures
from mha_core.i18n import tr
from mha_core.messages import N_
from mha_core.serving.computed import seq2seq as computed
from mha_core.serving.computed.seq2seq import KIND_NAMES, KINDS, WHISPER_NAME
from mha_core.teaching.examples import SPOKEN
from views._inputs import model_card, open_bundled, sentence_box
from views._stacks import CAPTIONS, kind_pickers, show_frames, show_steps
from views._state import answered, chart, current_model
from views._text import literal
from views._uploads import media_bytes
from views._visit import chosen, page_link, stop, tabs, widget
from views.parts.seq2seq import cross_tab

SOURCES = (N_("Speak a sentence"), N_("Upload a recording"), N_("Record with the microphone"))
LANGUAGES = {"auto": N_("detect it"), "en": N_("English"), "zh": N_("Chinese"), "de": N_("German"), "fr": N_("French"),
             "es": N_("Spanish"), "ja": N_("Japanese")}  # Whisper's codes for the languages offered
TABS = (N_("Cross-attention"), N_("Every head"), N_("Word timestamps"), N_("Encoder over time"))
TASK_NAMES = {"transcribe": N_("Write what is said"), "translate": N_("Translate into English")}


def clip_bytes(model: LoadedModel) -> bytes | None:
    """The audio the visitor chose: a typed sentence spoken by espeak-ng, an upload, or a recording."""
    source = widget(st.radio, "audio_from", SOURCES[0], tr("Audio"), options=list(SOURCES), format_func=tr,
                    horizontal=True)
    if source == SOURCES[0]:
        language = chosen("heard_lang", default_language(), (i18n.current(),), list(LANGUAGES))
        spoken = "zh" if language == "zh" or (language == "auto" and i18n.current() == "zh") else "en"
        text = widget(st.text_input, "spoken", SPOKEN[spoken], tr("Sentence to speak (espeak-ng, offline)"),
                      context=(spoken,))
        return answered(computed.spoken_of, text, spoken)
    if source == SOURCES[1]:
        return media_bytes((tr("WAV, FLAC, OGG or MP3 (the first 30 s are heard)"), ["wav", "flac", "ogg", "mp3"],
                            "audio_upload"), None)
    return media_bytes(None, (st.audio_input, tr("Record (your browser asks to use the microphone)"), "audio_record",
                              tr("Nothing recorded yet. If the browser was refused the microphone, allow it in the "
                                 "address bar, or speak a typed sentence or upload a recording instead.")))


def default_language() -> str:
    """What Whisper is told it hears unless the visitor says: Chinese in the Chinese interface (espeak-ng's Mandarin
    is heard as another language if left to detect), else detected."""
    return "zh" if i18n.current() == "zh" else "auto"


def whisper_page(model: LoadedModel) -> None:
    audio = clip_bytes(model)
    language = widget(st.selectbox, "heard_lang", default_language(), tr("Language"),
                      context=(i18n.current(),), options=list(LANGUAGES),
                      format_func=lambda code: tr(LANGUAGES[code]))
    task = widget(st.radio, "task", "transcribe", tr("Task"), options=list(TASK_NAMES),
                  format_func=lambda t: tr(TASK_NAMES[t]), horizontal=True)
    if audio is None:
        stop()
    clip = answered(computed.clip_of, audio)
    if clip is None:
        stop()
    st.audio(audio)
    told = None if language == "auto" else language
    with st.spinner(tr("Listening…")):
        heard = answered(computed.transcript_of, model, audio, told, task)
        said = heard if task == "transcribe" or heard is None else answered(computed.transcript_of, model, audio, told)
    if heard is None or said is None:
        stop()
    language_name = tr(LANGUAGES[said.language]) if said.language in LANGUAGES else said.language
    st.markdown(tr("**Heard** ({language}, {seconds:.1f} s): {text}", language=language_name, seconds=clip.seconds,
                   text=literal(said.text)))
    if task == "translate":
        st.markdown(tr("**Whisper's English translation:** {text}", text=literal(heard.text)))
    if heard.repeats_itself:
        st.warning(tr("Whisper repeats itself here (its text compresses {ratio:.1f}:1; above 2.4 openai-whisper treats "
                      "a decode as failed and retries it): it did not understand this audio well enough. The "
                      "synthetic voice is hard for a small Whisper, above all in Mandarin and when translating: try "
                      "a recording of a person speaking.", ratio=heard.compression_ratio))
        if heard.stopped_repeating:
            st.caption(tr("Decoding stopped after {n} pieces, where the text first compressed above 2.4:1, instead "
                          "of writing the same words on to the limit of {limit} pieces.", n=len(heard.decoded.steps),
                          limit=MAX_WRITTEN))
        st.caption(tr("The same encoder output, a decoder told to translate (its task piece): the cross-attention "
                      "below shows which stretch of the speech each English word listens to, as translation's "
                      "alignment. On the Translation page a decoder-only model aligns text with its self-attention."))
    if heard.text != heard.text_as_written and task == "transcribe":
        st.caption(tr("Whisper wrote it in Traditional characters ({written}); shown in Simplified characters "
                      "(OpenCC).", written=literal(heard.text_as_written)))
    if clip.cut:
        st.caption(tr("The file is {whole:.0f} s long: Whisper hears {window:.0f} s at a time, so only the first "
                      "{window:.0f} s are read.", whole=clip.source_seconds, window=clip.seconds))
    key = (str(model.model_dir), computed.digest(audio), told, task)
    for tab, tab_id in zip(tabs("x_tab", TABS), TABS, strict=True):
        if tab.open:
            with tab:
                TAB_VIEWS[tab_id](model, heard, audio, key)


def heads_tab(model: LoadedModel, heard: Transcript, audio: bytes, key: tuple) -> None:
    scores = heard.heads
    chart(("x_heads", *key), lambda: figures.head_scores_figure(heard.heads), width="stretch")
    st.markdown(tr("**Alignment heads found** (✓): {found}. **Published with the model** (●): {published}. "
                   "{agree} of the {n} found are on the published list.",
                   found=", ".join(f"L{lay}H{h}" for lay, h in scores.found) or tr("none"),
                   published=", ".join(f"L{lay}H{h}" for lay, h in scores.published) or tr("none"),
                   agree=len(scores.agreeing), n=len(scores.found)))
    st.caption(tr("A head counts as an alignment head when, piece after piece, its most-attended frame moves forward "
                  "(at least 85% of steps), sharply (that frame's weight at least 0.12 on average) and across at "
                  "least 40% of the speech. Found from this clip's maps, not copied from the list."))


def words_tab(model: LoadedModel, heard: Transcript, audio: bytes, key: tuple) -> None:
    if not heard.words:
        st.info(tr("No words were heard."))
        return
    table = pd.DataFrame([{tr("word"): w.word, tr("start (s)"): w.start, tr("end (s)"): w.end} for w in heard.words])
    st.dataframe(table, hide_index=True)
    named = [f"{w.word} ({w.start:.2f}–{w.end:.2f} s)" for w in heard.words]
    chosen = widget(st.selectbox, "x_word", 0, tr("Play one word"), context=key[1:2], options=list(range(len(named))),
                    format_func=named.__getitem__)
    word = heard.words[chosen]
    clip = answered(computed.word_audio_of, audio, word.start, word.end)
    if clip is not None:
        st.audio(clip, format="audio/wav")
    chart(("x_words", *key), lambda: figures.transcript_figure(heard), width="stretch")
    st.caption(tr("Times come from the alignment heads, as openai-whisper reads them: their cross-attention, "
                  "normalised and smoothed, averaged; dynamic time warping finds the cheapest path through it, piece "
                  "by piece, and each word spans its pieces' part of the path (trimmed of silence)."))


def encoder_tab(model: LoadedModel, heard: Transcript, audio: bytes, key: tuple) -> None:
    left, right = st.columns(2)
    layer = widget(left.selectbox, "x_enc_layer", 0, tr("Encoder layer"), options=list(range(model.n_layers)))
    head = widget(right.selectbox, "x_enc_head", 0, tr("Head"), options=list(range(model.n_heads)),
                  format_func=lambda h: tr("head {head}", head=h))
    show_frames(model, heard, audio, key[2], layer, head)


TAB_VIEWS = {TABS[0]: cross_tab, TABS[1]: heads_tab, TABS[2]: words_tab, TABS[3]: encoder_tab}


def text_page(model: LoadedModel) -> None:
    source = sentence_box()
    target = widget(st.text_input, "target", "", tr("Target (empty: the model writes its own)"))
    result = answered(computed.seq2seq_of, model, source, target.strip() or None)
    if result is None:
        stop()
    if result.encoder.truncated[0]:
        n, kept = result.encoder.n_tokens[0], result.encoder.lengths[0]
        st.warning(tr("The source was cut to the encoder's {kept} pieces: {n:,} of {n2:,} pieces at the end are not "
                      "read.", kept=kept, n=n - kept, n2=n))
    if result.decoder.truncated[0]:
        n, kept = result.decoder.n_tokens[0], result.decoder.lengths[0]
        st.warning(tr("The target was cut to the decoder's {kept} pieces: {n:,} of {n2:,} pieces at the end are not "
                      "read.", kept=kept, n=n - kept, n2=n))
    written = model.tokenizer.decode(result.target_ids(0), skip_special_tokens=True)
    st.markdown(tr("**Target:** {text}", text=literal(written)))
    kind = widget(st.radio, "kind", "cross", tr("Which attention"), options=list(KINDS),
                  format_func=lambda k: tr(KIND_NAMES[k]), horizontal=True)
    layer, head = kind_pickers(model, kind, "x")
    key = (str(model.model_dir), source, target, kind, layer, head)
    chart(("x_map", *key), lambda: figures.seq2seq_figure(result, kind, layer, head), width="stretch")
    st.caption(tr(CAPTIONS[kind]))
    if kind == "cross":
        alignment_table(model, source, target.strip() or None, layer, head)
        show_steps(computed.text_steps_of, model, source, target.strip() or None, layer, head)


def alignment_table(model: LoadedModel, source: str, target: str | None, layer: int, head: int) -> None:
    aligned = answered(computed.cross_alignment_of, model, source, target, layer, head)
    if aligned is None or not aligned.argmax:
        return
    pairs = set(aligned.symmetric)
    rows = [{tr("target piece"): piece, tr("most-attended source word"): aligned.source_words[w],
             tr("weight"): round(float(aligned.weights[t, w]), 3), tr("both ways"): "✓" if (t, w) in pairs else ""}
            for t, (piece, w) in enumerate(zip(aligned.target, aligned.argmax, strict=True))]
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    st.caption(tr("The word alignment this head implies: each written piece's most-attended source word; ✓ where "
                  "that word's most-attending piece is this one too (the symmetric alignment)."))


def not_encoder_decoder(model: LoadedModel) -> None:
    st.info(tr("{name} has one stack of layers. This page reads encoder–decoders, where a decoder writes while its "
               "cross-attention reads an encoder's output: {bundled} (bundled), or a T5, BART, Marian or NLLB model "
               "from the server's folder or Hugging Face cache.", name=model.name, bundled=WHISPER_NAME))
    open_bundled(WHISPER_NAME)
    stop()


def main() -> None:
    st.title(tr("Encoder–decoder: cross-attention"))
    st.caption(tr("The decoder writes one piece at a time; in every decoder layer, cross-attention takes Q from what "
                  "it has written and K, V from the encoder's reading of the source. The maps show where it looks."))
    page_link("views/translation.py", icon=":material/g_translate:",
              label=tr("Translation's alignment inside a decoder (Gemma 3, Chinese ↔ English)"))
    model = current_model()
    if model.arch.audio:
        model_card()
        whisper_page(model)
    elif model.encoder_decoder:
        text_page(model)
    else:
        model_card()
        not_encoder_decoder(model)


main()  # st.Page runs the file; no module imports a page (tests/test_pages.py)
