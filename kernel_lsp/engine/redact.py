"""Secrets kept away from the user's code and out of what leaves kernel-lsp.

The processes that run a workspace's code (checks, timing, profiles, NKI simulations) get an environment without
the variables named like secrets (`ANTHROPIC_API_KEY`, `*_TOKEN`, ...): the code has nothing to read. What such a
process reports is still scrubbed before it is shown, written or sent: a secret of this process's environment (or
one it was told of, the assistantApiKey setting) is replaced wherever it appears whole, reversed, as either half,
in base64 or in hex, since code that read it could print it in any of these forms.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_CHARS = 8  # shorter values (and halves) would blank common words
REDACTED = "<redacted>"

_known: set[str] = set()  # secrets this process holds outside its environment


def remember(value: str | None) -> None:
    """Treat `value` as a secret too (a key given in a setting rather than the environment)."""
    if value and len(value.strip()) >= MIN_CHARS:
        _known.add(value.strip())


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables named like secrets, and those `remember`ed, longest first."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= MIN_CHARS} | _known
    return sorted(values, key=len, reverse=True)


def forms(secret: str) -> list[str]:
    """The secret and the simple transforms of it that code could print: reversed, either half, base64 (standard
    and URL-safe, with and without padding) and hex (either case); longest first."""
    raw = secret.encode()
    found = {secret, secret[::-1]}
    half = len(secret) // 2
    if half >= MIN_CHARS:
        found |= {secret[:half], secret[half:], secret[:len(secret) - half], secret[len(secret) - half:]}
    for encoded in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        text = encoded.decode()
        found |= {text, text.rstrip("=")}
    found |= {raw.hex(), raw.hex().upper()}
    return sorted((f for f in found if len(f) >= MIN_CHARS), key=len, reverse=True)


def scrubber(secrets: Iterable[str] | None = None):
    """A function that blanks every form of the secrets (default: `secret_values()`) out of a text."""
    patterns = sorted({f for s in (secret_values() if secrets is None else secrets) for f in forms(s)},
                      key=len, reverse=True)
    if not patterns:
        return lambda text: text
    pattern = re.compile("|".join(re.escape(p) for p in patterns))
    return lambda text: pattern.sub(REDACTED, text) if isinstance(text, str) else text


def scrub(text: str, secrets: Iterable[str] | None = None) -> str:
    return scrubber(secrets)(text)


def user_code_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process that runs the workspace's code: without the variables named like secrets."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if not SECRET_NAME.search(k)}


__all__ = ["REDACTED", "SECRET_NAME", "forms", "remember", "scrub", "scrubber", "secret_values", "user_code_env"]
