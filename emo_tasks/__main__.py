"""`python -m emo_tasks ...`: the same as the `emo-tasks` console script (works before a reinstall)."""

from emo_tasks.cli import main

raise SystemExit(main())
