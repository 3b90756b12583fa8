"""What the outbound secret check costs per message: one automaton pass against one `in` per pattern.

    .venv/bin/python bench/secret_check.py [--quick]

For 1, 10 and 100 secrets in scope and clean messages of about 200 B, 4 KiB and 64 KiB
(clean is the worst case: nothing stops the scan early), times one check with
secrets_vault.scanner (the scanner built beforehand, as scanner_for caches it) beside the
naive check in the same run: `form in text` for every value and each of its encoded forms,
stopping at the first hit. The naive check catches less (no mixed-case hex, no escapes in
any mix, nothing wrapped into lines). Then the same messages written as a JSON string
(escapes throughout: every line break a `\\n`, every quote a `\\"`), the path that reads the
text unescaped too. Then the scanner's cold build for 100 secrets, a cached scanner_for, and
redact_text on a 200 B log line, which every log record pays. Prints p50/p99 in microseconds.
"""

import json
import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from secrets_vault import redaction  # noqa: E402
from secrets_vault.scanner import SecretScanner, encoded_forms, scanner_for  # noqa: E402

SECRET_COUNTS = (1, 10, 100)
SIZES = {"200 B": 200, "4 KiB": 4 * 1024, "64 KiB": 64 * 1024}
WORDS = (
    "the agent ran the tests and found two failures in the session runner while the thread "
    "waited for a card with the build log, retrying the request after a timeout of 30 seconds"
).split()


def secret_values(count: int, rnd: random.Random) -> list[tuple[str, str]]:
    """API-key-like values: a prefix and 32 to 48 urlsafe characters."""
    alphabet = string.ascii_letters + string.digits + "-_"
    return [
        (
            f"SECRET_{i}",
            rnd.choice(["sk_live_", "ghp_", "AKIA", ""]) + "".join(rnd.choices(alphabet, k=rnd.randint(32, 48))),
        )
        for i in range(count)
    ]


def message(size: int, rnd: random.Random) -> str:
    """Text shaped like agent output: prose, JSON, paths, ids, innocent hex and base64."""
    parts, length = [], 0
    while length < size:
        kind = rnd.random()
        if kind < 0.7:
            part = " ".join(rnd.choices(WORDS, k=rnd.randint(3, 12))) + "."
        elif kind < 0.8:
            part = f'{{"id": {rnd.randint(1, 99999)}, "status": "ok", "path": "src/app/{rnd.choice(WORDS)}.py"}}'
        elif kind < 0.9:
            part = f"commit {rnd.getrandbits(160):040x}"
        else:
            part = "data:" + "".join(rnd.choices(string.ascii_letters + string.digits + "+/", k=64)) + "=="
        parts.append(part)
        length += len(part) + 1
    return "\n".join(parts)[:size]


def timed(fn, budget: float) -> list[float]:
    """Microseconds per call: enough calls to fill `budget` seconds, at least 200."""
    for _ in range(20):
        fn()
    start = time.perf_counter()
    fn()
    once = time.perf_counter() - start
    calls = max(200, min(20_000, int(budget / max(once, 1e-7))))
    samples = []
    for _ in range(calls):
        start = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def p50_p99(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), statistics.quantiles(samples, n=100)[98]


def fmt(samples: list[float]) -> str:
    p50, p99 = p50_p99(samples)
    return f"{p50:.1f} / {p99:.1f}"


def main() -> None:
    budget = 0.1 if "--quick" in sys.argv else 0.5
    rnd = random.Random(2026)
    texts = {label: message(size, rnd) for label, size in SIZES.items()}
    all_pairs = secret_values(max(SECRET_COUNTS), rnd)

    print("One check of a clean message, p50 / p99 in microseconds\n")
    print(f"{'secrets':>8}{'message':>9}{'patterns':>10}{'scanner':>18}{'naive (in)':>20}{'naive/scanner p50':>20}")
    for count in SECRET_COUNTS:
        pairs = all_pairs[:count]
        scanner = SecretScanner(pairs)
        forms = [form for _, value in pairs for form in encoded_forms(value)]
        for label, text in texts.items():
            assert scanner.find(text) is None and not any(form in text for form in forms)
            fast = timed(lambda s=scanner, t=text: s.find(t), budget)
            naive = timed(lambda f=forms, t=text: any(form in t for form in f), budget)
            ratio = p50_p99(naive)[0] / p50_p99(fast)[0]
            print(f"{count:>8}{label:>9}{len(forms):>10}{fmt(fast):>18}{fmt(naive):>20}{ratio:>19.1f}x")

    print("\nThe same messages as a JSON string (escapes throughout), p50 / p99 in microseconds\n")
    print(f"{'secrets':>8}{'message':>9}{'scanner':>18}")
    for count in SECRET_COUNTS:
        scanner = SecretScanner(all_pairs[:count])
        for label, text in texts.items():
            escaped = json.dumps(text)[: len(text)]
            assert scanner.find(escaped) is None
            print(f"{count:>8}{label:>9}{fmt(timed(lambda s=scanner, t=escaped: s.find(t), budget)):>18}")

    pairs = tuple(all_pairs)
    builds = []
    for _ in range(3 if budget < 0.5 else 10):
        start = time.perf_counter()
        SecretScanner(pairs)
        builds.append((time.perf_counter() - start) * 1000)
    scanner_for(pairs)
    cached = timed(lambda: scanner_for(pairs), budget)
    print(
        f"\nBuilding the scanner for {len(pairs)} secrets (cold, uncached): median {statistics.median(builds):.2f} ms"
    )
    print(f"scanner_for with the same {len(pairs)} pairs (cached): {fmt(cached)} us")

    line = 'INFO tools.server call send_message {"thread": 42, "text": "the build passed in 31 s"} 200 in 3.4 ms'
    print("\nredact_text on a clean log line (every log record pays it), p50 / p99 in microseconds")
    remembered = 0
    for total in (0, 100, 1000):
        redaction.remember_values(value for _, value in secret_values(total - remembered, rnd))
        remembered = total
        redaction.redact_text(line)  # the automaton is rebuilt once after new values
        print(f"{total:>6} values remembered: {fmt(timed(lambda: redaction.redact_text(line), budget))}")


if __name__ == "__main__":
    main()
