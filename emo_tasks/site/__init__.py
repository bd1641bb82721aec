"""`emo-tasks view`: a static results browser over lmms-eval output folders, opened from disk (no server).

Why a static site: a researcher asking "why is this number 31?" wants to look at the samples behind it, with the
judge's evidence, on any machine, offline, and to send the folder to a colleague.  The site is generated once and
needs nothing but a browser.

The modules, in the order the data flows:
- `model.py`: what the site shows, as JSON-ready data, from the report's own functions (tables, CIs, notes) and
  each benchmark's `view_samples` (the registry); it names no benchmark.
- `media.py`: thumbnails of the image files a sample's media names (Pillow, content-addressed, cached).
- `files.py`: the data files (JSON made safe to load as a script), the staging folder, `--force`.
- `command.py`: the command line (`add_parser`, `main_view`; `write_compare_view` for `compare --view`) and
  `build_site`, which ties them together.
- `assets/`: the page (`index.html`), its script (`app.js`: hash routing, every model-written string inserted as
  text, never as HTML) and its style (`style.css`), copied as they are.
"""
