"""Reading what a run produced: the one reader of a run folder (`reader`), the report and trend of runs
(`report`, `trend`), their statistics (`stats`), exports in the authors' formats (`export`), and the masking of
secrets in everything these write (`redact`); a judge calibration file (`calibration`) and which judge made a run
(`judge_change`, shared with the gate).  `emo-tasks report` (`command`) and `emo-tasks export`
(`export`) live here."""
