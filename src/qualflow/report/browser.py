"""Check report pages in a real headless browser (Debian `chromium`): the page loads, no JavaScript
error, no broken image; and render it to PNG.

A copy of the page, beside it (so relative images resolve the same), gets a first <script> that
records `error` events (JS errors and failed resource loads) and, on `load`, every <img> that did
not decode; it writes them into a marker element which `--dump-dom` prints. No marker = the page
never finished loading, which fails too."""

from __future__ import annotations

import html as htmlmod
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--hide-scrollbars",
    "--mute-audio",
]

HOOK = """<script>(function(){var errs=[];
window.addEventListener('error',function(e){var t=e.target;
 if(t&&t.tagName){
  errs.push('resource '+t.tagName.toLowerCase()+' '+String(t.src||t.href||'').slice(0,120));}
 else{errs.push('js '+e.message+' @'+(e.lineno||'?'));}},true);
window.addEventListener('unhandledrejection',function(e){
 errs.push('js unhandled rejection '+e.reason);});
window.addEventListener('load',function(){var im=document.images,n=0;
 for(var i=0;i<im.length;i++){
  if(!im[i].complete||im[i].naturalWidth===0){
   errs.push('broken image '+(im[i].alt||String(im[i].src).slice(0,80)));}else{n++;}}
 var d=document.createElement('div');d.id='qf-browser-check';
 d.setAttribute('data-errors',JSON.stringify(errs));
 d.setAttribute('data-images',String(im.length));d.setAttribute('data-images-ok',String(n));document.body.appendChild(d);});
})();</script>"""


class BrowserUnavailable(RuntimeError):
    pass


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    exe = find_chromium()
    if exe is None:
        raise BrowserUnavailable("no chromium on PATH (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="qf-chromium-") as prof:
        return subprocess.run(
            [exe, *FLAGS, f"--user-data-dir={prof}", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


def check_page(
    page: str | Path,
    screenshot: str | Path | None = None,
    *,
    width: int = 1280,
    height: int = 1800,
    timeout: float = 120.0,
) -> dict:
    """Load `page` in headless chromium; returns {ok, errors, images, images_ok, screenshot}."""
    page = Path(page).resolve()
    text = page.read_text()
    m = re.search(r"<head[^>]*>", text, re.I)
    hooked = text[: m.end()] + HOOK + text[m.end() :] if m else HOOK + text
    probe = page.with_name(f".{page.stem}.browsercheck.html")
    probe.write_text(hooked)
    try:
        r = _run(
            [
                "--virtual-time-budget=15000",
                "--run-all-compositor-stages-before-draw",
                "--dump-dom",
                probe.as_uri(),
            ],
            timeout,
        )
    finally:
        probe.unlink(missing_ok=True)
    mk = re.search(
        r'<div id="qf-browser-check" data-errors="([^"]*)" '
        r'data-images="(\d+)" data-images-ok="(\d+)"',
        r.stdout,
    )
    if not mk:
        res = {
            "ok": False,
            "errors": [
                f"page did not finish loading (chromium rc {r.returncode}): "
                f"{r.stderr.strip()[-500:]}"
            ],
            "images": 0,
            "images_ok": 0,
        }
    else:
        errors = json.loads(htmlmod.unescape(mk.group(1)))
        res = {
            "ok": not errors,
            "errors": errors,
            "images": int(mk.group(2)),
            "images_ok": int(mk.group(3)),
        }
    if screenshot is not None:
        shot = Path(screenshot).resolve()
        shot.parent.mkdir(parents=True, exist_ok=True)
        shot.unlink(missing_ok=True)
        s = _run(
            [
                f"--screenshot={shot}",
                f"--window-size={width},{height}",
                "--virtual-time-budget=15000",
                page.as_uri(),
            ],
            timeout,
        )
        if not shot.exists() or shot.stat().st_size == 0:
            res["ok"] = False
            res["errors"].append(
                f"no screenshot written (chromium rc {s.returncode}): {s.stderr.strip()[-300:]}"
            )
        res["screenshot"] = str(shot)
    return res


def main_check_pages(a) -> int:
    bad = 0
    for p in a.pages:
        shot = Path(a.screenshots) / (Path(p).stem + ".png") if a.screenshots else None
        res = check_page(p, shot)
        print(json.dumps({"page": p, **res}))
        bad += not res["ok"]
    return 1 if bad else 0
