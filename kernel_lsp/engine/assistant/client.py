"""The Messages API, through the official `anthropic` SDK, imported on first use only (it costs ~1 s).

Every failure becomes a `ModelError` with a message fit for the user. The API key is held by the client object
only: it is never part of a message, a log record or an exception text this module produces (`_scrub` removes it
from the SDK's own messages too, in case a proxy echoes it back).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

KEY_ENV = "ANTHROPIC_API_KEY"
PRICES_ENV = "KERNEL_LSP_ASSISTANT_PRICES"
# US dollars per million input / output tokens, from https://docs.anthropic.com/en/docs/about-claude/pricing
# (standard rates, no batch or cache discounts). Override or extend with $KERNEL_LSP_ASSISTANT_PRICES, a JSON
# object {"model-name": [input, output]}. A model that is in neither is reported without a cost.
PRICES_SOURCE = "docs.anthropic.com/en/docs/about-claude/pricing"
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
}


class ModelError(RuntimeError):
    """The model could not be asked or gave no usable answer; str() is the message for the user."""


@dataclass
class Answer:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str | None = None


def prices() -> dict[str, tuple[float, float]]:
    table = dict(PRICES)
    raw = os.environ.get(PRICES_ENV)
    if raw:
        try:
            extra = json.loads(raw)
            for model, pair in extra.items():
                table[str(model)] = (float(pair[0]), float(pair[1]))
        except (ValueError, TypeError, IndexError, AttributeError):
            log.warning("%s is not a JSON object {\"model\": [input, output]}; ignored", PRICES_ENV)
    return table


def price_of(model: str) -> tuple[float, float] | None:
    """Per-million-token prices of a model: an exact entry, else the longest entry the name starts with
    (dated snapshots such as claude-sonnet-4-5-20250929)."""
    table = prices()
    if model in table:
        return table[model]
    best = max((m for m in table if model.startswith(m)), key=len, default=None)
    return table[best] if best else None


@dataclass
class Usage:
    """Tokens used by one action, and what they cost."""

    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0

    def add(self, answer: Answer) -> None:
        self.input_tokens += answer.input_tokens
        self.output_tokens += answer.output_tokens
        self.calls += 1

    @property
    def cost_usd(self) -> float | None:
        price = price_of(self.model)
        if price is None:
            return None
        return (self.input_tokens * price[0] + self.output_tokens * price[1]) / 1e6

    def text(self) -> str:
        tokens = f"{self.input_tokens:,} in / {self.output_tokens:,} out tokens ({self.calls} call" \
                 f"{'s' if self.calls != 1 else ''})"
        cost = self.cost_usd
        if cost is None:
            return f"{tokens}; no price known for {self.model} (set {PRICES_ENV})"
        return f"{tokens}, ≈${cost:.4f} at {self.model}'s list price"

    def to_json(self) -> dict:
        return {"model": self.model, "inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "calls": self.calls, "costUsd": None if self.cost_usd is None else round(self.cost_usd, 6),
                "pricesFrom": PRICES_SOURCE}


def resolve_key(setting: str) -> str:
    """The API key: the assistantApiKey setting, else $ANTHROPIC_API_KEY; empty when neither is set."""
    return (setting or os.environ.get(KEY_ENV, "")).strip()


@dataclass
class ModelConfig:
    model: str
    api_key: str = field(repr=False)
    base_url: str = ""
    timeout_s: float = 120.0
    max_tokens: int = 8000
    max_retries: int = 2  # the SDK's own default: 408/409/429/5xx and timeouts, with backoff


class ModelClient:
    """One client per action. `complete` streams (calling `on_text` with each piece) or not; cancellation of the
    awaiting task closes the HTTP connection."""

    def __init__(self, config: ModelConfig):
        self.config = config
        self._client: Any = None
        self._anthropic: Any = None

    async def _ensure(self) -> Any:
        if self._client is None:
            try:
                # The import takes ~1 s: not on the server's event loop.
                self._anthropic = await asyncio.to_thread(__import__, "anthropic")
            except ImportError:
                raise ModelError("the assistant needs the anthropic package where kernel-lsp runs: "
                                 "python -m pip install 'anthropic==2.14.0' in the server's environment") from None
            if not os.environ.get("ANTHROPIC_LOG"):
                # At debug level the SDK logs every request body (the user's file): not in kernel-lsp's log.
                for name in ("anthropic", "httpx2", "httpcore2", "httpx", "httpcore"):
                    logging.getLogger(name).setLevel(max(logging.getLogger(name).level, logging.INFO))
            kwargs: dict[str, Any] = {"api_key": self.config.api_key, "max_retries": self.config.max_retries,
                                      "timeout": float(self.config.timeout_s)}
            if self.config.base_url:
                kwargs["base_url"] = self.config.base_url
            self._client = self._anthropic.AsyncAnthropic(**kwargs)
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            try:
                await self._client.close()
            except Exception:  # closing an idle connection pool cannot matter to the user
                log.debug("closing the API client failed", exc_info=True)

    async def complete(self, system: str, messages: list[dict], *, on_text: Callable[[str], None] | None = None,
                       max_tokens: int | None = None) -> Answer:
        client = await self._ensure()
        limit = max_tokens or self.config.max_tokens
        try:
            if on_text is None:
                message = await asyncio.wait_for(client.messages.create(
                    model=self.config.model, max_tokens=limit, system=system, messages=messages),
                    self.config.timeout_s)
            else:
                message = await self._stream(client, system, messages, limit, on_text)
        except TimeoutError:
            raise ModelError(f"the model did not answer within {self.config.timeout_s:g} s (assistantTimeoutS)") \
                from None
        except ModelError:
            raise
        except Exception as exc:  # noqa: BLE001 - every SDK failure ends as one clear message
            raise ModelError(self.describe(exc)) from None
        text = "".join(getattr(block, "text", "") for block in message.content if block.type == "text")
        usage = message.usage
        return Answer(text, int(usage.input_tokens or 0), int(usage.output_tokens or 0), message.stop_reason)

    async def _stream(self, client: Any, system: str, messages: list[dict], limit: int,
                      on_text: Callable[[str], None]) -> Any:
        manager = client.messages.stream(model=self.config.model, max_tokens=limit, system=system,
                                         messages=messages)
        # The deadline covers the wait for the answer to start (retries included); once it streams, the SDK's
        # read timeout applies between pieces, so a long answer is not cut off.
        stream = await asyncio.wait_for(manager.__aenter__(), self.config.timeout_s)
        try:
            async for event in stream:
                if event.type == "text":
                    on_text(event.text)
            return await stream.get_final_message()
        finally:
            await manager.__aexit__(None, None, None)

    def describe(self, exc: BaseException) -> str:
        """A user-facing message for an SDK exception, without the key."""
        a = self._anthropic
        retries = f" after {self.config.max_retries} retries" if self.config.max_retries else ""
        status = getattr(exc, "status_code", None)
        detail = _scrub(_api_message(exc), self.config.api_key)
        if a is not None:
            if isinstance(exc, a.RateLimitError):
                return f"rate limited by the API{retries} (HTTP 429): {detail}; try again later"
            if isinstance(exc, a.AuthenticationError):
                return f"the API refused the key (HTTP 401): {detail}; check ANTHROPIC_API_KEY or assistantApiKey"
            if isinstance(exc, a.PermissionDeniedError):
                return f"the API denied access (HTTP 403): {detail}"
            if isinstance(exc, a.NotFoundError):
                return f"not found (HTTP 404): {detail}; check assistantModel ({self.config.model}) and " \
                       "assistantBaseUrl"
            if status == 529 or exc.__class__.__name__ == "OverloadedError":
                return f"the API is overloaded{retries} (HTTP 529): {detail}; try again later"
            if isinstance(exc, a.InternalServerError):
                return f"the API failed{retries} (HTTP {status}): {detail}"
            if isinstance(exc, a.APITimeoutError):
                return f"the API request timed out{retries} (assistantTimeoutS = {self.config.timeout_s:g} s)"
            if isinstance(exc, a.APIConnectionError):
                where = self.config.base_url or "api.anthropic.com"
                return f"cannot reach the API at {where}{retries}"
            if isinstance(exc, a.APIStatusError):
                return f"the API answered HTTP {status}: {detail}"
        return f"the API call failed: {_scrub(type(exc).__name__ + ': ' + str(exc), self.config.api_key)}"


def _api_message(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
    return str(getattr(exc, "message", "") or exc)


def _scrub(text: str, key: str) -> str:
    if key and len(key) >= 8:
        text = text.replace(key, "[key]")
    return text[:500]
