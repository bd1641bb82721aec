"""Deterministic stand-ins for what cannot exist here: the remote judge's judgement and an evaluated model's
answers, played by the loopback server (`judges.testing`).  Every answer derives from the request text alone, so
two runs (in-process, deferred, judged later) get the same answers for the same documents."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from judges.testing import Reply, last_user_text


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode("utf-8")).hexdigest()[:8], 16)


class Judge:
    """Step agent + judge answers derived from the request text only (deterministic across runs).  With
    `per_model`, the judge's ratings also depend on the judge model's name: two judges that disagree."""

    def __init__(self, wrong_count_every: int = 0, per_model: bool = False) -> None:
        self.wrong_count_every = wrong_count_every
        self.per_model = per_model

    def __call__(self, body: dict, attempt: int) -> Any:
        text = last_user_text(body)
        if text.startswith("Given the following answer"):
            n = 1 + _h(text) % 4
            steps = " ".join(f"Step {i}: cue {i} noted." for i in range(1, n))
            return Reply(text=f"<step>{steps} Step {n}: The predicted emotion is anger.</step>")
        if "Rating Requirements" in text:
            m = re.search(r"has (\d+) step\(s\)", text)
            n = int(m.group(1)) if m else 1 + _h(text) % 3
            h = _h(text + (str(body.get("model")) if self.per_model else ""))
            ratings = [f"{(h >> i) % 2}/1" for i in range(n - 1)]
            k = 1 + h % 3
            ratings.append(f"{(h >> 7) % (k + 1)}/{k}")
            if self.wrong_count_every and h % self.wrong_count_every == 0:
                ratings.append("1/1")
            return Reply(text="Ratings:\n<score>" + ", ".join(f"Step {i + 1}: {r}" for i, r in enumerate(ratings)) +
                         "</score>")  # fmt: skip
        if "Final score: <a number from 0 to 100>" in text:  # MultiEmo's LLM-as-a-judge stage
            return Reply(text=f"Conclusion: weighed both sides.\nFinal score: {_h(text) % 101}")
        if "Reference Reason: " in text:  # EmoBench-M's LLM scorer of SMILE's reasons: one dimension per prompt
            reference = text.split("Reference Reason: ", 1)[1].split("\n", 1)[0]
            logical, multimodal = smile_ratings(reference, harsh=HARSH in str(body.get("model")))
            if "**Logical Judgment Dimension:**" in text:
                return Reply(text=f"Logical Judgment Dimension: {logical}")
            return Reply(text=f"Multimodal Content Association Dimension: {multimodal}")
        return Reply(kind="status", status=400, text="unexpected request")


#: A judge model whose name holds this rates EmoBench-M's SMILE reasons lower (`smile_ratings`).
HARSH = "harsh"


def smile_ratings(reference: str, harsh: bool = False) -> tuple[int, int]:
    """The (logical, multimodal) rating `Judge` gives a SMILE reason from its reference reason alone: logical
    1-5, multimodal 0-5; `harsh`, logical one point lower, multimodal two (never below 0): the dimensions shift
    apart, so a reader that mixed them up would show."""
    logical, multimodal = 1 + _h(reference) % 5, _h(reference + "/multimodal") % 6
    return (logical - 1, max(multimodal - 2, 0)) if harsh else (logical, multimodal)


class Model(Judge):
    """`--model openai` (model_version=eval-model, or the `name` given) answers, per document and per repeat, plus
    the judge's.  `salt` changes which emotion label and which MVEI decision it answers: another model, other
    answers."""

    def __init__(self, *args: Any, name: str = "eval-model", salt: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.name = name
        self.salt = salt

    def __call__(self, body: dict, attempt: int) -> Any:
        text = last_user_text(body)
        if body.get("model") == self.name:
            if "Statement:" in text:
                first = _h(text + self.salt) % 3  # two repeats agree, the third differs: majorities, disagreements
                options = ["Correct", "Incorrect", "I cannot tell"]
                return Reply(text=options[first if attempt < 3 else (first + 1) % 3])
            if "How much will people feel" in text:
                return Reply(text=f"Score: {_h(text) % 101}. Reason: colours.")
            emobench_m = _emobench_m_answer(text + self.salt)
            if emobench_m is not None:
                return Reply(text=emobench_m)
            labels = re.findall(r"\b[a-z][a-z ]+\b", text.split("candidate", 1)[-1])[:12] or ["anger"]
            return Reply(text=f"Cues noted. Answer: {labels[_h(text + self.salt) % len(labels)].strip()}")
        return super().__call__(body, attempt)


def _emobench_m_answer(text: str) -> str | None:
    """An EmoBench-M answer in the requested format, the label (emotion and intent; a laughter reason) picked from
    the prompt's own lists by the prompt's hash; None for another benchmark's prompt."""
    h = _h(text)
    found = re.search(r"Choose one of the following labels as your final answer: (.+?)\. Respond", text)
    if found:
        labels = found.group(1).split(", ")
        return f"{{'emotion': '{labels[h % len(labels)]}'}}"
    emotion, intent = (re.search(rf"Choose one {k}: (.+?)\.", text) for k in ("emotion", "intent"))
    if emotion and intent:
        e, i = emotion.group(1).split(", "), intent.group(1).split(", ")
        return f"{{'emotion label': '{e[h % len(e)]}', 'intent label': '{i[(h >> 4) % len(i)]}'}}"
    if "why the audience laughed" in text:
        reasons = ("he offered to sell a smashed phone as slightly used", "the reply was absurdly literal")
        return f"The audience laughed because {reasons[h % 2]}."
    return None


class ReasoningModel(Model):
    """`Model`'s answers, each after a reasoning block full of decoys that a reader of the whole text would take
    (the other verdict, a wrong label, "Score: 5", "Incorrect"): MVEI `<think>…</think>`, MultiEmo `<think>…</think>`
    or, for half the rows, only the closing tag (a chat template that prefills the opening one), MME-Emotion
    `<analysis>…</analysis>`.  `judge_requests` holds each request to the step agent or judge as JSON text (whether
    the model's answer was sent to them with its reasoning)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.judge_requests: list[str] = []

    def judged_reasoning(self) -> int:
        """How many requests to the step agent or judge carried a reasoning block of the model's."""
        return sum("<analysis>" in r or "</think>" in r for r in self.judge_requests)

    def __call__(self, body: dict, attempt: int) -> Any:
        reply = super().__call__(body, attempt)
        text = last_user_text(body)
        if body.get("model") != self.name:
            self.judge_requests.append(json.dumps(body.get("messages"), ensure_ascii=False))
            return reply
        answer = reply.text
        if "Statement:" in text:
            decoy = "Incorrect" if answer == "Correct" else "Correct"
            return Reply(text=f"<think>At first sight: {decoy}. Answer: {decoy}. Score: 5</think>\n{answer}")
        if "How much will people feel" in text:
            thought = "A first guess. Score: 5 (Incorrect?)"
            opening = "" if _h(text) % 2 else "<think>"
            return Reply(text=f"{opening}{thought}</think>\n\n{answer}")
        label = answer.rsplit("Answer: ", 1)[-1]
        labels = re.findall(r"\b[a-z][a-z ]+\b", text.split("candidate", 1)[-1])[:12]
        decoy = next((x.strip() for x in labels if x.strip() != label), "disgust")
        return Reply(text=f"<analysis>Answer: {decoy}. Incorrect. Score: 5</analysis>\n{answer}")
