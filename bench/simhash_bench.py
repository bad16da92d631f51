"""SimHash speed: numpy-vectorised simhash64, the compiled (numba) path and a pure-Python
reference, µs per page.

    .venv/bin/python bench/simhash_bench.py [--words 3000] [--pages 200]

Prints µs/page (process CPU time) for each implementation on synthetic pages of
``--words`` words (Zipf-like vocabulary, punctuation, mixed case) and checks that all
give the same fingerprints. Budget: ≤ 400 µs for a 3,000-word page. The compiled
path's line also gives the CPU-s its loading took (numba's import, then compiling or
loading the cached kernels); without numba it says so.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import xxhash

from courtier.dedup.simhash import MASK64, prepare_compiled, simhash64, simhash_words, tokenize

BUDGET_US = 400.0


def reference_simhash(text: str) -> int:
    """Same definition as courtier.dedup.simhash, written with Python ints and loops."""
    hashes = [xxhash.xxh3_64_intdigest(w) for w in tokenize(text)]
    if len(hashes) >= 3:
        feats = []
        for i in range(len(hashes) - 2):
            a, b, c = hashes[i], hashes[i + 1], hashes[i + 2]
            x = (a * 0x9E3779B97F4A7C15) & MASK64
            x ^= ((b << 21) | (b >> 43)) & MASK64
            x ^= ((c << 42) | (c >> 22)) & MASK64
            x ^= x >> 30
            x = (x * 0xBF58476D1CE4E5B9) & MASK64
            x ^= x >> 27
            x = (x * 0x94D049BB133111EB) & MASK64
            x ^= x >> 31
            feats.append(x)
    else:
        feats = hashes
    counts = [0] * 64
    for f in feats:
        for bit in range(64):
            counts[bit] += 1 if (f >> bit) & 1 else -1
    return sum(1 << bit for bit in range(64) if counts[bit] > 0)


def make_pages(
    count: int, words: int, seed: int = 1, letters: str = "abcdefghijklmnopqrstuvwxyz"
) -> list[str]:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 11))) for _ in range(20_000)]
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    pages = []
    for _ in range(count):
        chosen = rng.choices(vocab, weights, k=words)
        pages.append(
            " ".join(
                (w.capitalize() if rng.random() < 0.08 else w)
                + (", " if rng.random() < 0.1 else "")
                for w in chosen
            )
        )
    return pages


def time_per_page(fn: object, pages: list[str], rounds: int) -> list[float]:
    assert callable(fn)
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        for page in pages:
            fn(page)
        samples.append((time.process_time() - start) / len(pages) * 1e6)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=3000)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{args.pages} pages × {args.words} words, Zipf vocabulary of 20,000 words")
    start = time.process_time()
    compiled = prepare_compiled()
    print(f"compiled path: {'loaded' if compiled else 'NOT available (numba missing)'} "
          f"in {time.process_time() - start:.2f} CPU-s")
    for label, letters in (
        ("ASCII text", "abcdefghijklmnopqrstuvwxyz"),
        ("non-ASCII text", "abcdefghijklmnopqrstuvwxyzéüñ"),
    ):
        pages = make_pages(args.pages, args.words, letters=letters)
        ref_pages = pages[: max(1, args.pages // 20)]
        same = sum(simhash64(p) == reference_simhash(p) for p in ref_pages)
        fast = time_per_page(simhash64, pages, args.rounds)
        slow = time_per_page(reference_simhash, ref_pages, 1)
        best, median = min(fast), statistics.median(fast)
        verdict = "within" if best <= BUDGET_US else "OVER"
        print(f"{label} ({len(pages[0])} chars/page)")
        print(
            f"  simhash64 (numpy)     : best {best:8.1f} µs/page, median {median:8.1f} µs/page"
            f"  [budget {BUDGET_US:.0f}: {verdict}]"
        )
        if compiled:
            jit = time_per_page(simhash_words, pages, args.rounds)
            jit_same = sum(simhash_words(p)[0] == simhash64(p) for p in pages)
            print(f"  compiled (numba)      : best {min(jit):8.1f} µs/page, median "
                  f"{statistics.median(jit):8.1f} µs/page ({best / min(jit):.1f}× faster; "
                  f"{jit_same}/{len(pages)} pages identical to simhash64)")
        print(f"  pure-Python reference : {slow[0]:8.1f} µs/page ({slow[0] / best:.0f}× slower)")
        print(f"  reference agreement   : {same}/{len(ref_pages)} pages identical")


if __name__ == "__main__":
    main()
