"""A token bucket: `burst` at once, then one every `every` seconds."""

import time


class TokenBucket:
    def __init__(self, *, burst: int, every: float):
        self.burst, self.every = burst, every
        self.tokens, self.at = float(burst), time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.at) / self.every)
        self.at = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True
