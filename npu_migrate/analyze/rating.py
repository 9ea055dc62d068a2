"""The migration complexity rating (Low / Medium / High) and the effort estimate, from counts per
category and the weights, caps, floors and days in data/rating.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from npu_migrate.analyze import catalog

LEVELS = ("Low", "Medium", "High")


@dataclass
class Rating:
    level: str
    score: float
    reasons: list[tuple[str, int, float]] = field(default_factory=list)  # (label, count, points)
    effort: list[tuple[str, int, float]] = field(default_factory=list)  # (label, count, days)
    why: dict[str, str] = field(default_factory=dict)  # label -> what the days are for

    @property
    def total_days(self) -> float:
        return round(sum(days for _, _, days in self.effort), 2)

    def to_dict(self) -> dict:
        return {"level": self.level, "score": self.score,
                "reasons": [{"category": c, "count": n, "points": p} for c, n, p in self.reasons],
                "effort_days": [{"category": c, "count": n, "days": d, "why": self.why.get(c, "")}
                                for c, n, d in self.effort],
                "total_days": self.total_days}


def rate(counts: dict[str, int]) -> Rating:
    spec = catalog.load("rating")
    score, level_index = 0.0, 0
    reasons, effort = [], []
    for key, category in spec["categories"].items():
        count = counts.get(key, 0)
        if not count:
            continue
        points = round(min(category["weight"] * count, category["cap"]), 2)
        score += points
        reasons.append((category["label"], count, points))
        if category["floor"]:
            level_index = max(level_index, LEVELS.index(category["floor"]))
        if category["days"]:
            effort.append((category["label"], count, round(category["days"] * count, 2)))
    for level, threshold in spec["thresholds"].items():
        if score >= threshold:
            level_index = max(level_index, LEVELS.index(level))
    effort.insert(0, (spec["baseline_label"], 1, spec["baseline_days"]))
    reasons.sort(key=lambda r: -r[2])
    why = {c["label"]: c["why"] for c in spec["categories"].values()}
    why[spec["baseline_label"]] = spec["baseline_why"]
    return Rating(LEVELS[level_index], round(score, 2), reasons, effort, why)
