"""A class at once: N students drive the app through Streamlit's websocket protocol (no browser each).

Each student opens a page, then types a sentence of their own (12-40 words) and changes it twice:
3 interactions. Prints per page: p50 / p95 / max latency, errors (failed or timed-out interactions,
error boxes), exceptions shown, server CPU seconds per interaction, and peak server RSS.
Targets (issue 9, 2 cores, N = 30): p95 <= 3 s on Heads, <= 4 s on Coreference and Walkthrough, 0 errors;
`--long 10`: 10 students sending 512-word-piece texts, no errors, peak RSS <= 2.5 GB.
`--cpu`: server CPU per interaction for one student and a new 25-piece sentence (Heads <= 0.1 s,
Coreference <= 0.15 s, Walkthrough <= 0.3 s), and for a sentence another session already used (<= 0.03 s).
`--proxy`: the same class through `make serve` (HAProxy) with 2 worker processes against 1; prints the
throughput ratio (target >= 1.6).
`--cold`: `make serve` with 1 and 2 processes, each started fresh: the first 30 students right after the start
(every process has loaded its model before HAProxy lets anyone in), then the next 30; p95 of the first <= 1.5 x
p95 of the next (issue 19).
`--at-once` (issue 44): every student opens the page at the same moment and sends 3 sentences of their own with no
think time (4 interactions each, the opening included; CPU per interaction counts all four). Target: p95 <= 1.5 s on
Heads, 0 errors.
`--floor` (issue 44): what a Heads click cannot cost less than: Streamlit drawing the page's elements with nothing
computed, the forward and spaCy's tags alone, beside the page's own cost (benchmarks/floor.py).
`--follow` (issue 47): N students following the teacher on the lesson page: from the teacher's move to every page
updated (p95 <= 2 s), the server's CPU per follower per move (issue 84: <= 5 ms) and while they follow an idle class
(<= 5 % of a core): benchmarks/following.py; `--redis`: the class in a redis-server (moves heard, not polled);
`--against DIR`: the app of another tree (e.g. `git archive` of the commit before a change) side by side, moves
alternating; with `--floor`: Streamlit's own floor of a follower's rerun beside it (benchmarks/follow_floor_app.py);
`--hosts N` (issue 84's lecture hall): the followers spread over N simulated hosts of 2 processes each behind one
HAProxy, the class in Redis, CPU summed over every process; `--kill-host`: the last host killed after the first move,
its students open the class again (how many, how many on the class's step) and follow the next moves.
`--bogus N` (issue 78): N sessions open /lesson?class=CODE-i and go; the idle server's CPU (< 2 % of a core) and disk
writes after them: benchmarks/bogus_codes.py.
`--heavy ablation|tsne|patching`: 29 students on Heads, first alone, then while one more visitor runs the heaviest
analysis a page offers (the ablation grid of a 512-piece text, t-SNE of one head over the bundled corpus, or the
residual patching grid of SmolLM2's default pair); prints the students' p95 with / without (issue 18: target <= 1.5)
and the server's peak RSS against its memory plan (issue 33: within it).
Run: .venv/bin/python benchmarks/bench_classroom.py [--students N] [--pages heads,coreference,walkthrough]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bogus_codes import bogus_codes  # noqa: E402
from benchmarks.floor import cpu_per_click as typed_cpu  # noqa: E402
from benchmarks.floor import floor_of_a_click  # noqa: E402
from benchmarks.following import follow_class, follow_hall  # noqa: E402
from benchmarks.serving import ServerGroup, app_server, proxy_group  # noqa: E402
from deploy.st_client import Interaction, Session  # noqa: E402

PAGES = {"heads": "", "coreference": "coreference", "walkthrough": "walkthrough"}
CPU_CLICKS = 12
PAIR_BOX = "Second sentence (differs in a few words)"  # the coreference page's minimal-pair box
WORDS = ("teacher student river village spring animal street library window garden morning evening doctor "
         "letter museum bridge mountain city train station farmer market kitchen painter children school "
         "winter summer ocean island forest castle queen king soldier engineer bakery bicycle").split()
VERBS = "crossed visited painted found watched opened carried followed repaired described remembered".split()
GLUE = "the a because while after before near with and but it she he they was were".split()


def sentence(rng: random.Random, n_words: int) -> str:
    """A varied sentence of about n_words words (different for every student and every change)."""
    words = []
    while len(words) < n_words:
        words += [rng.choice(GLUE), rng.choice(WORDS), rng.choice(VERBS), rng.choice(GLUE), rng.choice(WORDS)]
    words = words[:n_words]
    return " ".join(words).capitalize() + "."


def typed(page: str, text: str) -> dict[str, str]:
    """What a student submits on `page`: the sentence; on Coreference also a minimal pair (one word changed)."""
    if page != "coreference":
        return {"Sentence": text}
    words = text.split()
    words[len(words) // 2] = "bicycle" if words[len(words) // 2] != "bicycle" else "castle"
    return {"Sentence": text, PAIR_BOX: " ".join(words)}


async def student(base_url: str, page: str, texts: list[str], timeout: float) -> list[Interaction | Exception]:
    """Open the page, then submit each text: one Interaction (or the exception) per step."""
    session = Session(base_url, page=PAGES[page], timeout=timeout)
    steps: list[Interaction | Exception] = []
    try:
        steps.append(await session.open())
        for text in texts:
            steps.append(await session.set_texts(typed(page, text)))
    except Exception as err:  # noqa: BLE001 - a failed interaction is a result to count
        steps.append(err)
    finally:
        await session.close()
    return steps


async def run_class(base_url: str, page: str, class_texts: list[list[str]], timeout: float, stagger: float
                    ) -> tuple[list[Interaction | Exception], float]:
    async def delayed(i: int, texts: list[str]) -> list[Interaction | Exception]:
        await asyncio.sleep(i * stagger)
        return await student(base_url, page, texts, timeout)

    start = time.perf_counter()
    results = await asyncio.gather(*(delayed(i, texts) for i, texts in enumerate(class_texts)))
    return [step for steps in results for step in steps], time.perf_counter() - start


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def summarise(label: str, steps: list[Interaction | Exception], cpu: float, wall: float, rss: float) -> dict:
    done = [s for s in steps if isinstance(s, Interaction)]
    failed = [s for s in steps if not isinstance(s, Interaction)]
    times = [s.seconds for s in done]
    row = {"label": label, "interactions": len(done), "p50": statistics.median(times) if times else float("nan"),
           "p95": percentile(times, 0.95), "max": max(times, default=float("nan")),
           "errors": len(failed) + sum(len(s.errors) for s in done),
           "exceptions": sum(len(s.exceptions) for s in done), "cpu_per": cpu / max(len(done), 1),
           "throughput": len(done) / wall, "rss_gb": rss / 1e9}
    print(f"{label:<28} n={row['interactions']:<4} p50 {row['p50']:6.2f} s  p95 {row['p95']:6.2f} s  "
          f"max {row['max']:6.2f} s  errors {row['errors']}  exceptions {row['exceptions']}  "
          f"CPU/interaction {row['cpu_per']:.4f} s  {row['throughput']:.2f} interactions/s  "
          f"peak RSS {row['rss_gb']:.2f} GB", flush=True)
    for s in failed[:3]:
        print(f"    failed: {s!r}"[:300])
    for s in done:
        for e in (s.exceptions + s.errors)[:1]:
            print(f"    shown: {e[:200]}")
    return row


def class_texts(n: int, seed: int, long_words: int = 0, per_student: int = 2) -> list[list[str]]:
    rng = random.Random(seed)
    if long_words:
        return [[sentence(rng, long_words) for _ in range(per_student)] for _ in range(n)]
    return [[sentence(rng, rng.randint(12, 40)) for _ in range(per_student)] for _ in range(n)]


def warm_up(group: ServerGroup, pages: list[str]) -> None:
    """The teacher opens each page once before the class arrives (the model loads on the first visit)."""
    async def visit(url: str, page: str) -> float:
        session = Session(url, page=PAGES[page])
        seconds = (await session.open()).seconds
        await session.close()
        return seconds

    for url in group.worker_urls:  # every process loads the model on its first visit
        for page in pages:
            print(f"{page:<12} teacher's first visit: {asyncio.run(visit(url, page)):.2f} s", flush=True)


def measure(group: ServerGroup, page: str, texts: list[list[str]], timeout: float, stagger: float, label: str
            ) -> dict:
    cpu_before = group.cpu_seconds()
    steps, wall = asyncio.run(run_class(group.url, page, texts, timeout, stagger))
    return summarise(label, steps, group.cpu_seconds() - cpu_before, wall, group.peak_rss())


def cpu_per_click(group: ServerGroup, page: str, rng: random.Random) -> tuple[float, float]:
    """Server CPU of one student's interaction: a new ~25-piece sentence, and one already used."""
    new = [sentence(rng, 20) for _ in range(CPU_CLICKS + 1)]
    new_cpu = typed_cpu(group, new, PAGES[page], lambda text: typed(page, text))
    seen_cpu = typed_cpu(group, new[::-1], PAGES[page], lambda text: typed(page, text))  # sentences already seen
    return new_cpu, seen_cpu


HEAVY_PAGES = {"ablation": ("contributions", {"c_tab": "Ablation"}),
               "tsne": ("corpus", {"g_view": "Query–key view of one head", "g_projection": "t-SNE", "g_head": "3"}),
               # issue 33's hostile visitor: the residual patching grid of the Predictions page's own pair
               "patching": ("predictions", {"model": "SmolLM2-135M-Instruct", "p_tab": "Patching",
                                            "p_patch_what": "residual"})}


async def heavy_visitor(url: str, kind: str, text: str, started: asyncio.Event) -> float:
    """Start the heavy analysis and stay until it is done (or cancelled by the caller): seconds it took."""
    page, query = HEAVY_PAGES[kind]
    session = Session(url, page=page, query={**query, "text": text} if kind == "ablation" else query, timeout=3600)
    start = time.perf_counter()
    await session.connect_and_start()
    started.set()
    try:
        await session.read_until_finished()
        return time.perf_counter() - start
    finally:
        await session.close()


async def class_beside_heavy(group: ServerGroup, kind: str, heavy_text: str, texts: list[list[str]], timeout: float,
                             stagger: float) -> tuple[list[Interaction | Exception], float, float | None]:
    """The class while one visitor's heavy analysis runs (it starts 5 s earlier); the heavy run's seconds if it
    finished before the class did (then the comparison is unfair: make the heavy input longer)."""
    started = asyncio.Event()
    heavy = asyncio.create_task(heavy_visitor(group.url, kind, heavy_text, started))
    await started.wait()
    await asyncio.sleep(5)
    steps, wall = await run_class(group.url, "heads", texts, timeout, stagger)
    finished = heavy.result() if heavy.done() else None
    heavy.cancel()
    return steps, wall, finished


def heavy_comparison(kind: str, students: int, timeout: float, stagger: float) -> None:
    from transformers import AutoTokenizer

    from benchmarks._timing import text_of_pieces
    from mha_core.engine.loading.model import bundled_model_dir
    from mha_core.serving.heavy import default_slots
    from mha_core.serving.memory import memory_plan
    from mha_core.serving.menu import listed_model_bytes

    heavy_text = text_of_pieces(AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True), 512)
    with app_server() as group:
        warm_up(group, ["heads"])
        alone = measure(group, "heads", class_texts(students, 21), timeout, stagger, f"heads, {students} alone")
        cpu_before = group.cpu_seconds()
        steps, wall, finished = asyncio.run(class_beside_heavy(group, kind, heavy_text, class_texts(students, 22),
                                                               timeout, stagger))
        peak = group.peak_rss()  # while the server still runs
        beside = summarise(f"heads, {students} + 1 {kind}", steps, group.cpu_seconds() - cpu_before, wall, peak)
    if finished is not None:
        print(f"note: the {kind} finished in {finished:.1f} s, before the class did")
    print(f"p95 with one {kind} / alone: {beside['p95'] / alone['p95']:.2f} (target <= 1.5)")
    plan = memory_plan(listed_model_bytes(), default_slots())
    print(f"server peak RSS {peak / 2**30:.2f} GB; its plan: {plan.said()} (target: within it)")


def cold_and_warm(students: int, timeout: float) -> None:
    for workers in (1, 2):
        with proxy_group(workers) as group:
            first = measure(group, "heads", class_texts(students, 31), timeout, 0, f"{workers} process(es), first")
            then = measure(group, "heads", class_texts(students, 32), timeout, 0, f"{workers} process(es), next")
        print(f"{workers} process(es): p95 first {students} / next {students}: {first['p95'] / then['p95']:.2f} "
              "(target <= 1.5)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--pages", default="heads,coreference,walkthrough")
    parser.add_argument("--long", type=int, default=0, help="students sending 512-piece texts (memory check)")
    parser.add_argument("--cpu", action="store_true", help="server CPU per interaction, one student")
    parser.add_argument("--proxy", action="store_true", help="2 worker processes behind HAProxy against 1")
    parser.add_argument("--stagger", type=float, default=0.05, help="seconds between students' arrivals")
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--heavy", choices=sorted(HEAVY_PAGES), help="students beside one heavy analysis")
    parser.add_argument("--cold", action="store_true", help="first students after a start against the next ones")
    parser.add_argument("--follow", action="store_true",
                        help="issue 47: students following the teacher on the lesson page (benchmarks/following.py)")
    parser.add_argument("--redis", action="store_true", help="issue 84: --follow with the class in Redis")
    parser.add_argument("--hosts", type=int, help="issue 84: --follow on N simulated hosts of 2 processes each "
                        "behind one HAProxy, the class in Redis (benchmarks/following.py: follow_hall)")
    parser.add_argument("--kill-host", action="store_true", help="--hosts: the last host's processes killed after "
                        "the first move; its students open the class again through the proxy")
    parser.add_argument("--against", metavar="DIR", help="--follow: another tree's app side by side (before/after)")
    parser.add_argument("--bogus", type=int, metavar="N",
                        help="issue 78: N sessions of bogus class values opened and gone, then the idle server's CPU")
    parser.add_argument("--at-once", action="store_true",
                        help="issue 44's shape: every student at the same moment, 3 sentences each, no think time")
    parser.add_argument("--floor", action="store_true", help="issue 44: the least a Heads click can cost (with "
                        "--follow: the least a follower's rerun can cost, side by side)")
    args = parser.parse_args()
    pages = args.pages.split(",")
    if args.follow and args.hosts:
        follow_hall(args.students, args.timeout, args.hosts, args.kill_host)
        return
    if args.follow:
        follow_class(args.students, args.timeout, redis=args.redis, floor=args.floor, against=args.against)
        return
    if args.floor:
        rng = random.Random(5)
        floor_of_a_click([sentence(rng, 20) for _ in range(CPU_CLICKS + 1)], rounds=3)
        return
    if args.bogus:
        bogus_codes(args.bogus, args.timeout)
        return
    if args.cold:
        cold_and_warm(args.students, args.timeout)
        return
    if args.heavy:
        heavy_comparison(args.heavy, args.students - 1, args.timeout, args.stagger)
        return
    if args.cpu:
        with app_server() as group:
            warm_up(group, pages)
            for page in pages:
                new, seen = cpu_per_click(group, page, random.Random(1))
                print(f"{page:<12} server CPU per interaction: new sentence {new:.3f} s, seen sentence {seen:.3f} s",
                      flush=True)
        return
    if args.at_once:
        with app_server() as group:
            warm_up(group, pages)
            for page in pages:
                measure(group, page, class_texts(args.students, 30 + pages.index(page), per_student=3),
                        args.timeout, 0.0, f"{page}, {args.students} at once")
        return
    if args.long:
        with app_server() as group:
            warm_up(group, ["heads"])
            measure(group, "heads", class_texts(args.long, 7, long_words=520), args.timeout, args.stagger,
                    f"heads, {args.long} x 512 pieces")
        return
    if args.proxy:
        rows = {}
        for workers in (1, 2):
            with proxy_group(workers) as group:
                warm_up(group, pages[:1])
                rows[workers] = measure(group, pages[0], class_texts(args.students, 11), args.timeout,
                                        args.stagger, f"{pages[0]}, {workers} process(es), {args.students}")
        print(f"throughput 2 processes / 1 process: {rows[2]['throughput'] / rows[1]['throughput']:.2f} "
              "(target >= 1.6)")
        return
    with app_server() as group:
        warm_up(group, pages)
        for page in pages:
            measure(group, page, class_texts(args.students, pages.index(page)), args.timeout, args.stagger,
                    f"{page}, {args.students} students")


if __name__ == "__main__":
    main()
