"""A real headless Chromium driven over the DevTools protocol on a pipe (no extra package):
open a page, wait until it says it rendered, evaluate script in it, press keys, click, take
screenshots. Used by the browser tests and by bench/memory_html_bench.py."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium; `open(path)` gives a Page. Use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 1600):
        if CHROMIUM is None:
            raise BrowserError("no chromium binary on PATH (apt-get install -y chromium)")
        self.profile = tempfile.mkdtemp(prefix="memory-browser-")
        ours_read, browser_write = os.pipe()
        browser_read, ours_write = os.pipe()
        self._read, self._write = ours_read, ours_write

        def wire() -> None:  # the protocol pipe is fd 3 (browser reads) and 4 (it writes)
            high_in, high_out = os.dup2(browser_read, 100), os.dup2(browser_write, 101)
            os.dup2(high_in, 3)
            os.dup2(high_out, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--no-first-run", "--hide-scrollbars", f"--window-size={width},{height}",
             f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(3, 4), preexec_fn=wire, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(browser_read)
        os.close(browser_write)
        self._buffer = b""
        self._next = 0
        self.size = (width, height)

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None, timeout: float = 120) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            while b"\0" not in self._buffer:
                if time.monotonic() > deadline:
                    raise BrowserError(f"{method}: no answer in {timeout} s")
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise BrowserError("the browser closed the pipe")
                self._buffer += chunk
            raw, self._buffer = self._buffer.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def open(self, url: str, wait: float = 120) -> Page:
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target,
                                                      "flatten": True})["sessionId"]
        page = Page(self, session)
        width, height = self.size
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1,
                                                         "mobile": False}, session)
        self.call("Page.navigate", {"url": url}, session)
        page.wait_for("document.body && (document.body.getAttribute('data-render') "
                      "|| document.body.getAttribute('data-error'))", wait)
        return page

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        os.close(self._read)
        os.close(self._write)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Page:
    def __init__(self, browser: Browser, session: str):
        self.browser, self.session = browser, session

    def eval(self, expression: str) -> Any:
        result = self.browser.call("Runtime.evaluate", {
            "expression": expression, "returnByValue": True, "awaitPromise": True},
            self.session)
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.05)
        raise BrowserError(f"waited {timeout} s for {expression}")

    def attrs(self) -> dict[str, str]:
        """The data-* attributes of <body>: what the page says about its state."""
        return self.eval("Object.assign({}, document.body.dataset)")

    def key(self, key: str, shift: bool = False) -> None:
        """A real key press dispatched by the browser's input pipeline."""
        codes = {"ArrowLeft": 37, "ArrowUp": 38, "ArrowRight": 39, "ArrowDown": 40,
                 "Enter": 13, "Escape": 27}
        params: dict[str, Any] = {"key": key, "modifiers": 8 if shift else 0}
        if key in codes:
            params.update(code=key, windowsVirtualKeyCode=codes[key])
        else:
            params["text"] = key
        for kind in ("keyDown", "keyUp"):
            self.browser.call("Input.dispatchKeyEvent", {"type": kind, **params}, self.session)

    def box(self, selector: str) -> list[float]:
        """The element's box in the viewport, after scrolling it to the middle of the view."""
        return self.eval(f"(function(){{var e=document.querySelector({json.dumps(selector)});"
                         "e.scrollIntoView({block:'center'});var r=e.getBoundingClientRect();"
                         "return [r.left,r.top,r.width,r.height];})()")

    def click(self, selector: str, dx: float = 0.5, dy: float = 0.5) -> None:
        """A real mouse click at a point of the element (fractions of its box)."""
        box = self.box(selector)
        x, y = box[0] + box[2] * dx, box[1] + box[3] * dy
        for kind in ("mousePressed", "mouseReleased"):
            self.browser.call("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y,
                                                           "button": "left", "clickCount": 1},
                              self.session)

    def drag(self, selector: str, start: float, end: float, dy: float = 0.5) -> None:
        """Press at `start`, move to `end` (fractions of the element's width), release."""
        box = self.box(selector)
        y = box[1] + box[3] * dy
        points = [("mousePressed", start), ("mouseMoved", (start + end) / 2),
                  ("mouseMoved", end), ("mouseReleased", end)]
        for kind, fraction in points:
            self.browser.call("Input.dispatchMouseEvent", {
                "type": kind, "x": box[0] + box[2] * fraction, "y": y, "button": "left",
                "buttons": 0 if kind == "mouseReleased" else 1, "clickCount": 1}, self.session)

    def screenshot(self, path: Path) -> Path:
        data = self.browser.call("Page.captureScreenshot", {"format": "png",
                                                            "captureBeyondViewport": True},
                                 self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
