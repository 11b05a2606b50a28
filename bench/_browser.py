"""Headless Chromium driven over its DevTools socket: load a page, run script, screenshot.

Shared by the HTML report's browser tests (``tests/test_html_browser.py``) and its
scale benchmark (``bench_html_report.py``).  The only dependency beyond the
browser is ``websocket-client`` (in the ``test`` extra): the DevTools protocol is
JSON over one websocket, so no driver binary or framework is needed.

Every console error, uncaught exception and failed load the page reports is kept in
:attr:`Browser.errors`, so a caller can require a page that loads cleanly.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The Chromium executable: ``$OPPROF_BROWSER``, else the first of :data:`BROWSERS`."""
    given = os.environ.get("OPPROF_BROWSER")
    if given:
        return shutil.which(given) or (given if Path(given).is_file() else None)
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    """The browser did not start, or a command to it failed."""


class Browser:
    """One headless Chromium with one page; use as a context manager."""

    def __init__(self, executable: str, *, width: int = 1280, height: int = 800) -> None:
        import websocket  # the test extra; imported here so find_browser() needs nothing

        self._profile = tempfile.mkdtemp(prefix="opprof-chromium-")
        args = [
            executable,
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with it
        self._proc = subprocess.Popen(
            args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL
        )
        self.errors: list[str] = []
        self.requests: list[str] = []
        """The URL of every request the page made since the last :meth:`load` (its own
        document first): a self-contained page makes that one alone."""
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        try:
            port = self._port(Path(self._profile) / "DevToolsActivePort")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            self._ws = websocket.create_connection(
                page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True
            )
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.send(f"{domain}.enable")
            self.resize(width, height)
        except BaseException:
            self.close()
            raise

    def _port(self, active: Path) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrowserError(f"the browser exited with status {self._proc.returncode}")
            try:
                return int(active.read_text().split()[0])
            except (FileNotFoundError, IndexError, ValueError):
                time.sleep(0.05)
        raise BrowserError("the browser did not open its DevTools port within 30 s")

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the browser and remove its profile directory."""
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    # -- the protocol -------------------------------------------------------------

    def _note(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"uncaught: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = [a.get("value", a.get("description", "")) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(str(a) for a in args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} {entry.get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.requests.append(str(params.get("request", {}).get("url")))
        if method:
            self.events.append(message)

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """One DevTools command; returns its result (events that arrive meanwhile are kept)."""
        self._next_id += 1
        mine = self._next_id
        self._ws.send(json.dumps({"id": mine, "method": method, "params": params or {}}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == mine:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._note(message)

    def _wait_event(self, method: str, timeout_s: float) -> None:
        for message in self.events:
            if message.get("method") == method:
                self.events.remove(message)
                return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = json.loads(self._ws.recv())
            self._note(message)
            if message.get("method") == method:
                self.events.remove(message)
                return
        raise BrowserError(f"no {method} within {timeout_s} s")

    # -- what callers use ---------------------------------------------------------

    def resize(self, width: int, height: int, *, mobile: bool = False) -> None:
        """The viewport, as a window of ``width`` x ``height`` CSS pixels would show it."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
        )

    def load(self, path: Path, *, fragment: str = "", timeout_s: float = 60) -> float:
        """Open a local file (at ``#fragment``, when given); seconds from navigation until
        the page's scripts have run and its first frame after them is drawn."""
        self.events.clear()
        self.requests.clear()
        started = time.perf_counter()
        url = path.resolve().as_uri() + (f"#{fragment}" if fragment else "")
        self.send("Page.navigate", {"url": url})
        self._wait_event("Page.loadEventFired", timeout_s)
        self.evaluate("new Promise(done => requestAnimationFrame(() => setTimeout(done, 0)))")
        return time.perf_counter() - started

    def evaluate(self, expression: str) -> Any:
        """The value of a script expression (promises awaited); a thrown error raises."""
        result = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"script failed: {text}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: Path, *, full_page: bool = False) -> Path:
        """A PNG of the viewport (or the whole page) at ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.evaluate(
                "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"
            )
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
        data = self.send("Page.captureScreenshot", params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
