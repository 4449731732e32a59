"""Drive a headless Chromium through the Chrome DevTools protocol, with the standard library only.

Chromium is started with ``--remote-debugging-pipe``: protocol messages are NUL-terminated JSON on
file descriptors 3 (to the browser) and 4 (from it), so no websocket client and no driver binary
are needed. Used by the report's browser tests, its benchmark and the docs screenshots; it drives
the system's Chromium (Debian's ``chromium`` package) and never downloads a browser.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """Path of a Chromium or Chrome binary: ``$CAPPLAN_CHROMIUM``, else the first on ``PATH``; None if absent."""
    env = os.environ.get("CAPPLAN_CHROMIUM")
    if env:
        return env if Path(env).exists() else shutil.which(env)
    for name in _CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    """The browser failed, exited, or did not answer in time."""


@dataclass
class PageLog:
    """What a page did: console errors, uncaught exceptions and the URLs it requested."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


class Browser:
    """A headless Chromium with one page, driven over the DevTools pipe.

    Use as a context manager; :meth:`open` loads a URL and waits for its load event.
    """

    def __init__(self, binary: str | None = None, width: int = 1400, height: int = 900,
                 timeout: float = 30.0) -> None:
        path = binary or find_chromium()
        if path is None:
            raise BrowserError("no Chromium found (install Debian's `chromium` or set CAPPLAN_CHROMIUM)")
        self.timeout = timeout
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="capplan-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # Move the child's ends above fd 4 first, so that dup2 onto 3 and 4 never clobbers them.
        child_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(to_browser_r)
        os.close(from_browser_w)

        def _wire() -> None:  # runs in the child between fork and exec
            os.dup2(child_r, 3)
            os.dup2(child_w, 4)

        args = [path, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
                "--mute-audio", "--hide-scrollbars", f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}", "about:blank"]
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, preexec_fn=_wire, close_fds=False)
        os.close(child_r)
        os.close(child_w)
        self._buf = b""
        self._id = 0
        self._events: list[dict[str, Any]] = []
        self.session = ""
        self.log = PageLog()
        try:
            target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Network", "Log"):
                self.call(f"{domain}.enable")
            self.resize(width, height)
        except BaseException:
            self.close()
            raise

    # -- protocol ------------------------------------------------------------------------------
    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("the browser did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError(f"the browser exited (code {self._proc.poll()})")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        msg: dict[str, Any] = json.loads(raw)
        if "method" in msg:
            self._note(msg)
        return msg

    def _note(self, msg: dict[str, Any]) -> None:
        method, params = msg["method"], msg.get("params", {})
        self._events.append(msg)
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            self.log.errors.append("console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in args))
        elif method == "Runtime.exceptionThrown":
            d = params.get("exceptionDetails", {})
            self.log.errors.append("exception: " + str(d.get("exception", {}).get("description", d.get("text"))))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.log.errors.append("log: " + str(params["entry"].get("text")))
        elif method == "Network.requestWillBeSent":
            self.log.requests.append(str(params.get("request", {}).get("url")))

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one protocol command to the page (or the browser before a page exists); return its result."""
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session:
            msg["sessionId"] = self.session
        try:
            os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise BrowserError(f"the browser exited (code {self._proc.poll()})") from None
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def wait_event(self, method: str, since: int = 0) -> dict[str, Any]:
        """The first event ``method`` at or after position ``since`` of the event list, waiting for it."""
        deadline = time.monotonic() + self.timeout
        k = since
        while True:
            while k < len(self._events):
                if self._events[k]["method"] == method:
                    return self._events[k]
                k += 1
            self._read(deadline)

    # -- page ----------------------------------------------------------------------------------
    def open(self, url: str) -> float:
        """Load ``url`` and wait for its load event; return the seconds it took."""
        mark = len(self._events)
        t0 = time.perf_counter()
        self.call("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", mark)
        return time.perf_counter() - t0

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-serialisable values only)."""
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in r:
            raise BrowserError(f"evaluate failed: {r['exceptionDetails'].get('text')}")
        return r.get("result", {}).get("value")

    def mouse(self, kind: str, x: float, y: float) -> None:
        """Move the mouse to (x, y) in the viewport, or click there (``kind``: move | click)."""
        if kind == "move":
            self.call("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
            return
        for t in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", {"type": t, "x": x, "y": y, "button": "left", "clickCount": 1})

    def resize(self, width: int, height: int) -> None:
        """Set the viewport size in CSS pixels."""
        self.width, self.height = width, height
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def screenshot(self, full_page: bool = False, max_height: int = 0,
                   clip: tuple[float, float, float, float] | None = None) -> bytes:
        """A PNG of the viewport, the whole page or a region.

        ``full_page`` captures the whole page (at most ``max_height`` pixels high when given);
        ``clip`` = (x, y, width, height) captures that region in page coordinates.
        """
        params: dict[str, Any] = {"format": "png"}
        if full_page and clip is None:
            size = self.call("Page.getLayoutMetrics")["cssContentSize"]
            height = int(size["height"]) if not max_height else min(int(size["height"]), max_height)
            clip = (0, 0, int(size["width"]), height)
        if clip is not None:
            x, y, w, h = clip
            params["clip"] = {"x": x, "y": y, "width": w, "height": h, "scale": 1}
            params["captureBeyondViewport"] = full_page or y + h > self.height or x + w > self.width
        return base64.b64decode(self.call("Page.captureScreenshot", params)["data"])

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the browser and all its processes (Linux ``/proc``)."""
        tick = os.sysconf("SC_CLK_TCK")
        stats: dict[int, tuple[int, float]] = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / tick)
        tree = {self._proc.pid}
        grown = True
        while grown:
            grown = False
            for pid, (ppid, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grown = True
        return sum(stats[p][1] for p in tree if p in stats)

    # -- lifetime ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the browser and remove its temporary profile."""
        for fd in (self._to_browser, self._from_browser):
            with contextlib.suppress(OSError):
                os.close(fd)
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
