"""The names of a run folder's own files and folders, in one place: the judge stage and the benchmarks write them,
the reader (`emo_tasks.results.reader`) and every command read them.

Why one place: these names are the on-disk layout every tool agrees on (docs/cli.md#which-run-a-command-reads); a
name typed twice can drift, and then one tool writes what another never finds.  Plain constants with no import, so
any writer, however low, can use them.

    RUN/                                    an lmms-eval --output_path (results nested in a model folder or not)
      <stamp>_results.json                  lmms-eval's results; `emo-tasks judge`'s carry a MARKER block
      emo_tasks_judge/                      JUDGE_DIR: judge logs and summaries, deferred answers
        <name>_<stamp>_judge.jsonl          a judge log (JUDGE_LOG_SUFFIX)
        <name>_<stamp>_summary.json         the summary beside it (SUMMARY_SUFFIX, `summary_file`)
        <name>_<stamp>_answers.jsonl        an EMO_JUDGE=defer run's answers (ANSWERS_SUFFIX)
      judged/<judge setup>/                 JUDGED_DIR: what `emo-tasks judge` wrote, laid out as RUN
        judge_setup.json                    SETUP_RECORD: the judge setup and what the endpoint reported serving
      emo_tasks_refused.json                REFUSED: why a VLMEvalKit run folder holds no results
"""

from __future__ import annotations

from pathlib import Path

#: The folder `emo-tasks judge` writes its results into, one subfolder per judge setup: RUN/judged/<judge setup>/.
JUDGED_DIR = "judged"
#: A judged folder's record of its judge setup: what was asked (the folder's name hashes it) and what the endpoint
#: reported it serves (never hashed; a later run's real difference is refused): RUN/judged/<judge setup>/SETUP_RECORD.
SETUP_RECORD = "judge_setup.json"
#: The folder of a run (RUN/, RUN/judged/<judge setup>/) holding its judge logs, their summaries and deferred answers.
JUDGE_DIR = "emo_tasks_judge"
#: The provenance block of the results `emo-tasks judge` writes (the source results file, the judge setup, ...):
#: it marks them as ours, so the stage never takes them for the lmms-eval run it judges.
MARKER = "emo_tasks_judge"
#: A judge log's name ends so: `<name>_<stamp>_judge.jsonl` (one JSON object a line per judged sample).
JUDGE_LOG_SUFFIX = "_judge.jsonl"
#: The summary beside a judge log (or a predictions log) replaces the log's own suffix with this one.
SUMMARY_SUFFIX = "_summary.json"
#: An `EMO_JUDGE=defer` run's saved answers of a task without a sample log: `<name>_<stamp>_answers.jsonl`.
ANSWERS_SUFFIX = "_answers.jsonl"
#: The folder of a judged folder that `emo-tasks judge --batch` keeps its book of batches in (state.json: every file
#: and batch id, what came back), its request files and the downloaded outputs: RUN/judged/<judge setup>/BATCH_DIR/.
BATCH_DIR = "emo_tasks_batch"
#: What a refused VLMEvalKit evaluation leaves in its run folder instead of results: why (`reader.refused_note`).
REFUSED = "emo_tasks_refused.json"


def summary_file(log: Path, suffix: str = JUDGE_LOG_SUFFIX) -> Path:
    """The summary written beside a log whose name ends with `suffix` (a judge log by default)."""
    return log.with_name(log.name[: -len(suffix)] + SUMMARY_SUFFIX)
