"""Primes: the one primality test of the library (a modulus p must be prime for the Fourier structure of Z_p)."""
from __future__ import annotations

import itertools

#: Miller-Rabin bases that decide primality for every n below 3.3e24, so every 64-bit integer.
MILLER_RABIN_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def is_prime(n: int) -> bool:
    """Return whether ``n`` is a prime (Miller-Rabin on the bases that decide every n below 3e24, so every int64)."""
    if n < 2 or any(n % b == 0 for b in MILLER_RABIN_BASES):
        return n in MILLER_RABIN_BASES
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for base in MILLER_RABIN_BASES:
        x = pow(base, d, n)
        if x not in (1, n - 1) and all((x := pow(x, 2, n)) != n - 1 for _ in range(s - 1)):
            return False
    return True


def nearest_primes(n: int) -> str:
    """Return the primes nearest ``n`` in words: "below, above", or "above" when no prime lies below."""
    below = next((k for k in range(n - 1, 1, -1) if is_prime(k)), None)
    above = next(k for k in itertools.count(max(n + 1, 2)) if is_prime(k))
    return f"{below}, {above}" if below else str(above)
