"""The judge as a stage of its own, for every benchmark: `emo-tasks judge` (`stage`, its units of work and
errors in `stage_types`), its dry run with token counts and cost (`dryrun`, `tokens`), judge-vs-judge
agreement (`agreement` reads the two judged runs, `agreement_report` compares and prints them) and the two
commands' bodies (`command`: `emo-tasks judge`, `emo-tasks agreement`).  The engine that sends the requests is
the top-level `judges` package."""
