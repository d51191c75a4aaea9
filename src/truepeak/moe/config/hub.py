"""Fetching a Hugging Face hub id's ``config.json`` (``huggingface_hub``, imported lazily)."""

from __future__ import annotations

import re
from pathlib import Path

from truepeak.errors import TruepeakError
from truepeak.moe.config.families import _read_json

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
#: The hub's address when huggingface_hub names none.
DEFAULT_ENDPOINT = "https://huggingface.co"


def _hub_settings() -> tuple[bool, str]:
    """``(offline, endpoint)`` as huggingface_hub itself reads them (``huggingface_hub.constants.HF_HUB_OFFLINE`` and
    ``ENDPOINT``, from its HF_HUB_OFFLINE / HF_ENDPOINT settings), so a fetch honours the hub client's own
    configuration; ``(False, DEFAULT_ENDPOINT)`` when those constants cannot be imported."""
    import importlib

    try:
        constants = importlib.import_module("huggingface_hub.constants")
    except ImportError:
        return False, DEFAULT_ENDPOINT
    return bool(getattr(constants, "HF_HUB_OFFLINE", False)), getattr(constants, "ENDPOINT", None) or DEFAULT_ENDPOINT


def _hub_download(hf_hub_download, repo_id: str) -> str:
    """``config.json`` of ``repo_id``: from the local hub cache if it is there, else downloaded, after a 3-second check
    that the hub answers at all (offline, huggingface_hub retries for about 24 s and prints a warning per retry), made
    directly unless a proxy is configured (behind one, only the proxy answers).

    Raises:
        TruepeakError: the hub cannot be reached (the message names the host), or HF_HUB_OFFLINE is set and the file is
            not in the cache. Other huggingface_hub errors propagate (the caller turns them into one line).
    """
    import logging
    import socket
    from urllib.parse import urlparse
    from urllib.request import getproxies

    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)
    try:
        try:
            return hf_hub_download(repo_id, "config.json", local_files_only=True)
        except Exception:  # noqa: BLE001  (not cached: fetch it)
            pass
        offline, endpoint = _hub_settings()
        if offline:
            raise TruepeakError(f"config.json of {repo_id!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE "
                                "is set; pass a local path to its config.json instead")
        url = urlparse(endpoint)
        host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
        proxied = any(k in getproxies() for k in ("https", "http", "all"))   # the proxies urllib would use
        try:
            if not proxied:       # behind a proxy only the proxy is reachable: let huggingface_hub go through it
                socket.create_connection((host, port), timeout=3).close()
        except OSError as exc:
            raise TruepeakError(f"cannot reach the Hugging Face hub at {host}:{port} to fetch {repo_id!r} "
                                f"({exc.strerror or type(exc).__name__}; offline?); pass a local path to its "
                                "config.json instead") from None
        return hf_hub_download(repo_id, "config.json", etag_timeout=10)
    finally:
        hub_log.setLevel(level)


def _fetch_hub_config(repo_id: str) -> dict:
    """Download ``config.json`` of ``repo_id`` with huggingface_hub (lazily imported)."""
    fix = "pass a local path to its config.json instead"
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise TruepeakError(f"fetching {repo_id!r} from the Hugging Face hub needs huggingface_hub, which is not "
                            f"installed (pip install huggingface_hub); or {fix}") from None
    try:
        local = _hub_download(hf_hub_download, repo_id)
    except TruepeakError:
        raise
    except Exception as exc:  # noqa: BLE001  (offline, 404, gated repo, bad token: all end the same way)
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TruepeakError(f"could not fetch config.json of {repo_id!r} from the Hugging Face hub "
                            f"({type(exc).__name__}: {msg[:200]}); {fix}") from None
    return _read_json(Path(local).read_text(), f"config.json of {repo_id!r}")
