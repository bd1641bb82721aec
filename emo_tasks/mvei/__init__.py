"""MVEI (Emotion Statement Judgment): does an emotion-centric statement fit the image? Correct / Incorrect."""
