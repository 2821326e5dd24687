"""What a lesson step says about its figure (issue 77): each step's words are a fixed teaching part
(mha_core.teaching.lesson) and claims computed here from the same numbers its figure draws, so a sentence cannot
contradict the chart above it on any model. A claim is a marked template and its values; the page words it in its
language (values named in `words` are translated too).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mha_core.analysis.coref.sentence import AntecedentScores, PairComparison
from mha_core.analysis.heads.display import AttentionView
from mha_core.engine.result import AttentionResult
from mha_core.messages import N_
from mha_core.teaching.walkthrough import Walkthrough

MISHEARD = 0.1  # a character error rate above this: the step says what Whisper heard is not the sentence


@dataclass(frozen=True)
class Claim:
    template: str  # marked with N_
    values: tuple[tuple[str, object], ...] = ()
    words: tuple[str, ...] = ()  # the values that are marked words themselves (a role's name)

    def kwargs(self) -> dict[str, object]:
        return dict(self.values)


def claim(template: str, words: Sequence[str] = (), **values: object) -> Claim:
    return Claim(template, tuple(values.items()), tuple(words))


@dataclass(frozen=True)
class PronounRow:
    """Step 1's figure: one head's row from the unit holding the pronoun, over the shown units (specials hidden,
    rows rescaled to 1), and the head chosen for it: the one giving the antecedent the most weight over the other
    candidate (the clearest head for the unit that holds the pronoun)."""

    labels: tuple[str, ...]
    weights: np.ndarray  # (N,) the bars
    layer: int
    head: int
    query: int  # the unit holding the pronoun (its row); the last unit without a pronoun
    antecedent: int | None  # units; None where the sentence has no such word
    other: int | None
    pronoun: str  # the words asked about ("" without a pronoun)
    antecedent_word: str
    other_word: str
    causal: bool = False  # a decoder: the units after the query get no weight

    def weight(self, unit: int | None) -> float:
        return float(self.weights[unit]) if unit is not None else 0.0


def unit_of_word(view: AttentionView, result: AttentionResult, word: str) -> int | None:
    pieces = result.word_pieces(0, word) if word else []
    return view.unit_of(pieces) if pieces and any(pieces[0] in group for group in view.pieces) else None


def kept_share(view: AttentionView, result: AttentionResult, query: int) -> np.ndarray:
    """(L,H) the share of the query unit's row (its pieces' rows averaged) on the pieces the view shows: the rest
    went to the hidden special pieces, and the view rescaled what was left to add up to 1."""
    shown = sorted(p for group in view.pieces for p in group)
    rows = result.text_attention(0)[:, :, list(view.pieces[query]), :]  # (L,H,P,T)
    return rows[..., shown].sum(axis=-1).mean(axis=-1)


def clearest_head(view: AttentionView, result: AttentionResult, query: int, antecedent: int, other: int | None
                  ) -> tuple[int, int]:
    """(layer, head) whose `query` row gives `antecedent` the most weight over `other` (the most weight, without
    another candidate), counted before the special pieces were hidden: a head that sends nearly everything to the
    first piece (a decoder's sink) is not made clear by rescaling what little is left."""
    margin = view.maps[:, :, query, antecedent] - (view.maps[:, :, query, other] if other is not None else 0)
    margin = margin * (kept_share(view, result, query) if view.hidden_special else 1)
    layer, head = np.unravel_index(int(np.argmax(margin)), margin.shape)
    return int(layer), int(head)


def pronoun_row(view: AttentionView, result: AttentionResult, pronoun: str, antecedent: str, other: str
                ) -> PronounRow:
    query = unit_of_word(view, result, pronoun)
    key, rival = unit_of_word(view, result, antecedent), unit_of_word(view, result, other)
    rival = None if rival == key else rival
    if query is None or key is None:
        query, key, rival, pronoun = len(view.labels) - 1, None, None, ""
        layer, head = 0, 0
    else:
        layer, head = clearest_head(view, result, query, key, rival)
    return PronounRow(view.labels, view.maps[layer, head, query], layer, head, query, key, rival, pronoun,
                      antecedent, other, result.causal)


def plain(label: str) -> str:
    """A shown unit's label as the words it holds (no space marker, no piece counter such as ¹/₂)."""
    return label.replace("␣", "").split("¹")[0].split("²")[0].strip()


def where_pronoun_is(row: PronounRow, unknown: str | None) -> tuple[Claim, ...]:
    """Nothing where the pronoun is a unit of its own; else the piece that holds it, or its first piece, or that the
    model cannot read it (`unknown`: its vocabulary's unknown piece, [UNK])."""
    label = row.labels[row.query]
    if unknown and label == unknown:
        return (claim(N_("This model cannot read '{pronoun}': it reads the unknown piece '{piece}' there, so these "
                         "bars say little about the pronoun."), pronoun=row.pronoun, piece=label),)
    if plain(label) == row.pronoun:
        return () if plain(label) == label.replace("␣", "").strip() else (
            claim(N_("The model reads '{pronoun}' in several pieces: the bars are the row of '{piece}'."),
                  pronoun=row.pronoun, piece=label),)
    return (claim(N_("The model reads '{pronoun}' inside the piece '{piece}': the bars are that piece's row."),
                  pronoun=row.pronoun, piece=label),)


def why_claims(row: PronounRow, unknown: str | None = None) -> tuple[Claim, ...]:
    """Step 1: which head, which word, how much; where the pronoun sits inside a larger piece; where the head still
    prefers the other candidate (the link is weak on this model)."""
    query_label = row.labels[row.query]
    if row.antecedent is None:
        return (claim(N_("This sentence has no pronoun with a noun before it: the bars are the last word's "
                         "('{word}') row in layer {layer}, head {head}."), word=query_label, layer=row.layer,
                      head=row.head),)
    claims = list(where_pronoun_is(row, unknown))
    w_a, w_o = row.weight(row.antecedent), row.weight(row.other)
    if row.other is None:
        claims.append(claim(N_("Layer {layer}, head {head} gives '{antecedent}' the most weight of every head: "
                               "{w_a:.2f}."), layer=row.layer, head=row.head, antecedent=row.antecedent_word,
                            w_a=w_a))
    elif w_a > w_o:
        claims.append(claim(N_("Here '{pronoun}' means '{antecedent}'. Layer {layer}, head {head} links them most "
                               "clearly: {w_a:.2f} on '{antecedent}' against {w_o:.2f} on '{other}'."),
                            pronoun=row.pronoun, antecedent=row.antecedent_word, other=row.other_word,
                            layer=row.layer, head=row.head, w_a=w_a, w_o=w_o))
    else:
        claims.append(claim(N_("Here '{pronoun}' means '{antecedent}', but no head of this model gives "
                               "'{antecedent}' more weight than '{other}': the link is weak on this model. The "
                               "closest, layer {layer}, head {head}: {w_a:.2f} on '{antecedent}', {w_o:.2f} on "
                               "'{other}'."), pronoun=row.pronoun, antecedent=row.antecedent_word,
                            other=row.other_word, layer=row.layer, head=row.head, w_a=w_a, w_o=w_o))
    later = len(row.labels) - 1 - row.query
    if row.causal and later:
        claims.append(claim(N_("In this decoder a word sees only itself and the words before it: the {later} after "
                               "'{word}' get 0."), later=later, word=query_label))
    top = int(np.argmax(row.weights))
    if top != row.antecedent:
        claims.append(claim(N_("Its largest bar is '{word}' ({weight:.2f})."), word=row.labels[top],
                            weight=float(row.weights[top])))
    return tuple(claims)


@dataclass(frozen=True)
class ScoresRow:
    """Step 2's numbers: the walkthrough's row of the same head over every piece, specials included."""

    query_piece: str  # the piece whose row the walkthrough shows (the first of the pronoun's unit)
    query_pieces: int  # how many pieces step 1's unit averaged
    antecedent: str  # step 1's label for it
    on_antecedent: float  # the row's weight on the antecedent's pieces
    on_specials: float  # on the special pieces (hidden in step 1)
    shown: float  # step 1's weight on the antecedent (specials hidden, rescaled)


def scores_row(w: Walkthrough, view: AttentionView, row: PronounRow, query_piece: int,
               special: Sequence[bool]) -> ScoresRow | None:
    if row.antecedent is None:
        return None
    pieces = list(view.pieces[row.antecedent])
    probs = w.probs[query_piece]
    specials = float(sum(p for p, is_special in zip(probs, special, strict=True) if is_special))
    return ScoresRow(w.tokens[query_piece], len(view.pieces[row.query]), row.labels[row.antecedent],
                     float(probs[pieces].sum()), specials, row.weight(row.antecedent))


def four_steps_claims(numbers: ScoresRow | None) -> tuple[Claim, ...]:
    if numbers is None:
        return ()
    values = {"query": numbers.query_piece, "antecedent": numbers.antecedent, "weight": numbers.on_antecedent,
              "specials": numbers.on_specials, "shown": numbers.shown}
    if numbers.query_pieces > 1:
        return (claim(N_("This is step 1's head with every piece shown: '{query}', the first of the word's {n} "
                         "pieces, gives '{antecedent}' {weight:.2f} here and the special pieces {specials:.2f}. Step "
                         "1 averaged the rows of the word's pieces, hid the special pieces and rescaled the rest to "
                         "add up to 1, so it showed {shown:.2f}."), n=numbers.query_pieces, **values),)
    return (claim(N_("This is step 1's head with every piece shown: '{query}' gives '{antecedent}' {weight:.2f} "
                     "here and the special pieces {specials:.2f}. Step 1 hid the special pieces and rescaled the "
                     "rest to add up to 1, so it showed {shown:.2f}."), **values),)


@dataclass(frozen=True)
class HeadHabits:
    """Step 3's numbers: how many heads send most of their rows' weight to the word before, to the first word, to
    the word itself, and elsewhere (a row's largest weight, a head's majority of rows)."""

    previous: int
    first: int
    itself: int
    elsewhere: int


def head_habits(maps: np.ndarray) -> HeadHabits:
    """From the overview's maps (L,H,N,N); rows 1.. are counted (row 0 has only itself or the first word)."""
    n = maps.shape[-1]
    if n < 2:
        return HeadHabits(0, 0, 0, int(maps.shape[0] * maps.shape[1]))
    rows = np.arange(1, n)
    top = maps[:, :, 1:, :].argmax(axis=-1)  # (L,H,N-1)
    share = {name: (top == target).mean(axis=-1) for name, target in
             (("previous", rows - 1), ("first", 0), ("itself", rows))}
    counts = {name: int((s > 0.5).sum()) for name, s in share.items()}
    total = maps.shape[0] * maps.shape[1]
    return HeadHabits(counts["previous"], counts["first"], counts["itself"], total - sum(counts.values()))


def heads_claims(habits: HeadHabits, selected: tuple[int, int], hidden: int = 0) -> tuple[Claim, ...]:
    """Step 3's sentence; `hidden` special pieces left out of the overview (as in step 1) add one saying why step 5,
    which counts them, finds other numbers (on Gemma: 0 heads on the first word here, 38 on the first token there)."""
    counts = claim(N_("On this sentence, {previous} heads look mostly at the word before, {first} at the first word, "
                      "{itself} at the word itself and {elsewhere} elsewhere (each head's most common largest "
                      "weight). The outlined tile is step 1's head, layer {layer}, head {head}."),
                   previous=habits.previous, first=habits.first, itself=habits.itself, elsewhere=habits.elsewhere,
                   layer=selected[0], head=selected[1])
    if not hidden:
        return (counts,)
    return counts, claim(N_("As in step 1, the maps hide the {n} special pieces and rescale each row to 1; step 5 "
                            "counts them, so a head it labels by a special piece (its first token or [CLS]) is counted "
                            "here by where the rest of its weight goes."), n=hidden)


def parameters_claims(name: str, total: int, attention: int) -> tuple[Claim, ...]:
    return (claim(N_("{name} keeps {attention:,} of its {total:,} parameters in attention ({share:.0%})."),
                  name=name, attention=attention, total=total, share=attention / max(total, 1)),)


def cost_claims(name: str, windows: Sequence[int | None], causal: bool) -> tuple[Claim, ...]:
    """Step 11: which of the model's layers pay the square (every word attends to every word, a decoder's to every
    earlier one) and which look only at a sliding window of the last pieces (per layer, from its config: Gemma 3's
    layer_types and sliding_window), where the cost grows with n × window once n is longer than the window."""
    windowed = [w for w in windows if w is not None]
    layers, full = len(windows), len(windows) - len(windowed)
    if not windowed:
        return (claim(N_("All {layers} layers of {name} attend to every earlier word: each pays the square.")
                      if causal else N_("All {layers} layers of {name} attend to every word: each pays the square."),
                      layers=layers, name=name),)
    window = max(windowed)  # one size per model (arch.sliding_window)
    if not full:
        return (claim(N_("All {layers} layers of {name} look only at the last {window} pieces (a sliding window): "
                         "past {window} pieces the cost grows with n × {window}, not n²."),
                      layers=layers, name=name, window=window),)
    return (claim(N_("On {name} only {full} of the {layers} layers attend to every earlier word and pay the square; "
                     "the other {windowed} look only at the last {window} pieces (a sliding window), so past {window} "
                     "pieces their cost grows with n × {window}, not n².") if causal else
                  N_("On {name} only {full} of the {layers} layers attend to every word and pay the square; the other "
                     "{windowed} look only at the nearest {window} pieces (a sliding window), so past {window} pieces "
                     "their cost grows with n × {window}, not n²."),
                  name=name, full=full, layers=layers, windowed=len(windowed), window=window),)


def roles_claims(labels: np.ndarray) -> tuple[Claim, ...]:
    """Step 5: how many heads of the grid have each role, most common first ((role, count) pairs; the roles are
    marked words the page translates)."""
    names, counts = np.unique(labels.astype(str), return_counts=True)
    ordered = sorted(zip(counts.tolist(), names.tolist(), strict=True), key=lambda c: (-c[0], c[1]))
    return (claim(N_("The grid's {n} heads on this sentence: {roles}."), words=("roles",), n=int(labels.size),
                  roles=tuple((name, count) for count, name in ordered)),)


@dataclass(frozen=True)
class PairFigure:
    """Step 6's minimal pair as its grid draws it: the margins of candidate a over b in both sentences, the words
    changed, and whether both were continued with a question (a decoder's pronoun before every changed word)."""

    comparison: PairComparison
    changed: tuple[tuple[str, str], ...]
    name_a: str
    name_b: str
    probed: bool


WEAK_MORE = N_("More heads favour '{b}' than '{a}': on this model the link is weak.")
WEAK_TIE = N_("As many heads favour '{b}' as '{a}': on this model the link is weak.")  # 36 and 36: not "more"
CLEAREST = N_("The clearest head for '{a}' is layer {layer}, head {head}: {w_a:.2f} against {w_b:.2f} (every piece "
              "counted, special pieces too, as in step 2).")


def coreference_claims(scores: AntecedentScores, listed: int, pair: PairFigure | None) -> tuple[Claim, ...]:
    """Step 6: how the heads split over the candidates (all of them, and the table's), where that is weak the
    clearest head for the pair's first candidate, and what the pair changes."""
    names = [c.text for c in scores.candidates]
    preferred = scores.preferred()
    shown = min(listed, preferred.size)
    in_table = np.bincount([preferred[lh] for lh in scores.ranked_heads()[:shown]], minlength=len(names))
    every = np.bincount(preferred.ravel(), minlength=len(names))
    split = lambda counts: ", ".join(f"{n} {int(c)}" for n, c in zip(names, counts, strict=True))  # noqa: E731
    claims = [claim(N_("'{pronoun}' attends more to each candidate in this many of all {n} heads: {every}. The "
                       "table lists the {listed} heads that prefer one most clearly: {table}."),
                    pronoun=scores.pronoun.text, n=int(preferred.size), every=split(every), listed=shown,
                    table=split(in_table))]
    if pair is not None and pair.name_a in names and pair.name_b in names:
        a, b = names.index(pair.name_a), names.index(pair.name_b)
        if every[a] <= every[b]:
            margin = scores.margin(a, b)
            layer, head = np.unravel_index(int(np.argmax(margin)), margin.shape)
            claims += [claim(WEAK_TIE if every[a] == every[b] else WEAK_MORE, a=pair.name_a, b=pair.name_b),
                       claim(CLEAREST, a=pair.name_a, layer=int(layer), head=int(head),
                             w_a=float(scores.scores[a, layer, head]), w_b=float(scores.scores[b, layer, head]))]
    return tuple(claims) + pair_claims(pair)


def pair_claims(pair: PairFigure | None) -> tuple[Claim, ...]:
    if pair is None:
        return (claim(N_("No minimal pair is compared: the note by the pair's choices says why."),),)
    changes = ", ".join(f"{x} → {y}" for x, y in pair.changed)
    flips = int(pair.comparison.flips.sum())
    largest = float(np.abs(pair.comparison.delta).max())
    claims = [claim(N_("The pair changes {changes}: the pronoun should then mean '{b}' instead of '{a}'."),
                    changes=changes, a=pair.name_a, b=pair.name_b)]
    if pair.probed:
        claims.append(claim(N_("In a decoder the pronoun comes before the change and cannot see it, so both "
                               "sentences are continued with a question and the grid reads its last word."),))
    if flips == 1:
        claims.append(claim(N_("1 head switches from '{a}' to '{b}', as a reader does; the largest change of a "
                               "head's margin is {largest:.2f}."), a=pair.name_a, b=pair.name_b, largest=largest))
    elif flips:
        claims.append(claim(N_("{flips} heads switch from '{a}' to '{b}', as a reader does; the largest change of "
                               "a head's margin is {largest:.2f}."), flips=flips, a=pair.name_a, b=pair.name_b,
                            largest=largest))
    else:
        claims.append(claim(N_("No head switches from '{a}' to '{b}': on this model the heads barely follow the "
                               "meaning (the largest change of a head's margin is {largest:.2f})."), a=pair.name_a,
                            b=pair.name_b, largest=largest))
    return tuple(claims)


def comparable(text: str) -> str:
    """The characters a transcript is scored on: letters and digits, lower case (no spaces or punctuation)."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def character_error_rate(spoken: str, heard: str) -> float:
    """Edits (Levenshtein) turning what was spoken into what was heard, over the spoken characters."""
    a, b = comparable(spoken), comparable(heard)
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, start=1):
        current = [i]
        for j, cb in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1] / max(len(a), 1)


def cross_claims(name: str, spoken: str, heard: str) -> tuple[Claim, ...]:
    """Step 8: how well Whisper heard the sentence espeak-ng spoke (its character error rate)."""
    rate = character_error_rate(spoken, heard)
    if rate > MISHEARD:
        return (claim(N_("{name} hears espeak-ng's synthetic voice poorly here: it heard '{heard}' for '{spoken}', "
                         "{rate:.0%} of the characters wrong, so the map links the audio to what it heard."),
                      name=name, heard=heard, spoken=spoken, rate=rate),)
    return (claim(N_("{name} heard the sentence espeak-ng spoke with {rate:.0%} of its characters wrong: '{heard}'."),
                  name=name, heard=heard, rate=rate),)


def translation_claims(source_words: Sequence[str], target_words: Sequence[str],
                       links: Sequence[tuple[int, int]], pronouns: Sequence[str],
                       source_pronouns: Sequence[str] = ()) -> tuple[Claim, ...]:
    """Step 9: what the translation's pronouns align to in the source (links: (source word, target word)), then each
    source pronoun (`source_pronouns`) that no link leaves (the English class's 'it' on Gemma: the figure draws it
    without a line)."""
    unlinked = [claim(N_("'{word}' in the source aligns to no word of the translation."), word=word)
                for s, word in enumerate(source_words)
                if word.lower() in source_pronouns and all(source != s for source, _ in links)]
    found = [t for t, word in enumerate(target_words) if word.lower() in pronouns]
    if not found:
        return (claim(N_("The translation has no pronoun: its heads align the other words."),), *unlinked)
    return (*target_pronoun_claims(source_words, target_words, links, found), *unlinked)


def target_pronoun_claims(source_words: Sequence[str], target_words: Sequence[str],
                          links: Sequence[tuple[int, int]], found: Sequence[int]) -> list[Claim]:
    """What each translation pronoun (`found`: target word indices) aligns to, numbered where one is written twice."""
    claims = []
    for t in found:
        linked = " ".join(source_words[s] for s, target in sorted(links) if target == t)
        word = target_words[t]
        if target_words.count(word) > 1:  # 牠不跨了路，因為牠太累了: which 牠, as the figure's rows number them
            claims.append(claim(N_("'{word}' (translation word {index}) aligns to '{linked}' in the source."),
                                word=word, index=t, linked=linked) if linked else
                          claim(N_("'{word}' (translation word {index}) aligns to no word of the source."), word=word,
                                index=t))
            continue
        claims.append(claim(N_("'{word}' in the translation aligns to '{linked}' in the source."), word=word,
                            linked=linked) if linked else
                      claim(N_("'{word}' in the translation aligns to no word of the source."), word=word))
    return claims
