"""The judge as a stage of its own, for every benchmark: `emo-tasks judge` (`stage`, its units of work and
errors in `stage_types`), its dry run with token counts and cost (`dryrun`, `tokens`), and judge-vs-judge
agreement (`agreement`).  The engine that sends the requests is the top-level `judges` package."""
