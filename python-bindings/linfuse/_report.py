"""What linfuse's passes did, as data: `Report`, `Remark`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

# Remark messages of linfuse's passes (see docs/MergeParallelMatmuls.md and
# docs/FoldMatmulChains.md) and the kind each one reports.
_KINDS = [
    ("merge", re.compile(r"^merged (?P<count>\d+) matmuls (sharing|reading) (?P<shared>\S+)"
                         r".* into one (?P<shape>\S+) GEMM")),
    ("fold", re.compile(r"^folded (?P<what>.*?)(, FLOPs per row (?P<flops>.*))?$")),
    ("not-folded", re.compile(r"^chain of (?P<count>\d+ )?matmuls not folded: (?P<why>.*)$")),
    ("not-folded", re.compile(r"^(?P<what>input scale) not folded into weight arguments: "
                              r"(?P<why>.*)$")),
    ("not-merged", re.compile(r"^not merged with the matmul at (?P<other>\S+), both reading "
                              r"(?P<shared>\S+): (?P<why>.*)$")),
    ("lift", re.compile(r"^lifted (?P<count>\d+) weight-only ops of @(?P<function>\S+)")),
    ("specialize", re.compile(r"^specialized (?P<op>\S+) to (?P<named>\S+) \((?P<what>.*)\)$")),
    ("not-specialized", re.compile(r"^not specialized to a matmul: (?P<why>.*)$")),
    ("gemm", re.compile(r"^raised to linfuse\.gemm(?P<what>.*)$")),
]


@dataclass(frozen=True)
class Remark:
    """One optimization remark: where, which pass, what it did.

    `kind` is "merge", "not-merged" (a matmul reading the same input as an
    earlier one that was not merged with it; `details["why"]` says why),
    "fold", "not-folded", "lift", "specialize" (a contraction in another
    spelling, `details["op"]`, became `details["named"]`), "not-specialized"
    (a contraction-looking op left alone; `details["why"]`), "gemm" (a
    matmul became a library GEMM call) or "other"; `details` holds the numbers the message
    states (for a merge: count, shared, shape).
    """

    kind: str
    pass_name: str
    message: str
    location: str
    name: str = ""
    file: str = ""
    line: int = 0
    column: int = 0
    details: dict = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        return f"{self.location}: {self.message}"


def _classify(message: str) -> tuple[str, dict]:
    for kind, pattern in _KINDS:
        match = pattern.match(message)
        if match:
            details = {k: v for k, v in match.groupdict().items() if v is not None}
            for key in ("count",):
                if key in details:
                    details[key] = int(details[key].strip())
            return kind, details
    return "other", {}


class Report:
    """The remarks and counters of one optimize / lower / compile run.

    >>> report.merges            # [Remark(kind='merge', ...), ...]
    >>> report.statistics["linfuse-merge-parallel-matmuls"]["matmuls-removed"]
    """

    def __init__(self, remarks: Iterable[Remark] = (), statistics: dict | None = None):
        self.remarks: list[Remark] = list(remarks)
        self.statistics: dict[str, dict[str, int]] = statistics or {}

    @classmethod
    def _from_native(cls, native) -> "Report":
        remarks = []
        for r in native.remarks:
            kind, details = _classify(r.message)
            loc = r.location
            remarks.append(Remark(kind, r.pass_name, r.message, str(loc), loc.name,
                                  loc.file, loc.line, loc.column, details))
        stats: dict[str, dict[str, int]] = {}
        for pass_name, name, value in native.statistics:
            stats.setdefault(pass_name, {})[name] = value
        return cls(remarks, stats)

    def _merge(self, other: "Report") -> None:
        self.remarks.extend(other.remarks)
        for pass_name, counters in other.statistics.items():
            mine = self.statistics.setdefault(pass_name, {})
            for name, value in counters.items():
                mine[name] = mine.get(name, 0) + value

    def of_kind(self, kind: str) -> list[Remark]:
        return [r for r in self.remarks if r.kind == kind]

    @property
    def merges(self) -> list[Remark]:
        """Groups of matmuls merged into one GEMM."""
        return self.of_kind("merge")

    @property
    def folds(self) -> list[Remark]:
        """Chains, LoRA sums and scales folded into weights."""
        return self.of_kind("fold")

    def __str__(self) -> str:
        lines = [str(r) for r in self.remarks if r.kind != "gemm"]
        for pass_name, counters in self.statistics.items():
            values = ", ".join(f"{k}={v}" for k, v in counters.items())
            lines.append(f"{pass_name}: {values}")
        return "\n".join(lines) if lines else "(nothing merged or folded)"

    def __repr__(self) -> str:
        return (f"<linfuse.Report: {len(self.merges)} merges, {len(self.folds)} folds, "
                f"{len(self.remarks)} remarks>")
