#!/usr/bin/env python
"""Check report pages in headless chromium (no JS error, no broken image) and render them to PNG.

    python scripts/check_pages.py results/report/<KEY>/report.html results/compare/*/compare.html \
        --screenshots results/screenshots
Exit status 1 if any page fails."""

import argparse
import sys

from qualflow.report.browser import main_check_pages

if __name__ == "__main__":
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("pages", nargs="+")
    ap.add_argument("--screenshots", help="write <page stem>.png here")
    sys.exit(main_check_pages(ap.parse_args()))
