"""Reading what a run produced: the one reader of a run folder (`reader`), the report and trend of runs
(`report`, `trend`), their statistics (`stats`), exports in the authors' formats (`export`), and the masking of
secrets in everything these write (`redact`).  `emo-tasks report` (`command`) and `emo-tasks export`
(`export`) live here."""
