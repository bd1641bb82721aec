"""EmoBench-M: 13 video+audio scenarios of emotional intelligence, scored by rule (classification, joint emotion +
intent) and by generation metrics (SMILE's laughter reasons)."""
