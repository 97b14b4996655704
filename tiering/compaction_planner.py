"""Which data files of a lake table a compaction merges: per bucket (of each log partition), runs
of neighbouring small files, bin-packed into bins of at most the target file size.

A file is small below :data:`~lakelog.lake.table_layout.SMALL_FILE_SHARE` of the target: a file near the target is left alone, so a compaction never rewrites what it just wrote. Only
neighbours merge: a bucket's files hold consecutive offset ranges, and a merged file must hold one
range with no other file's offsets inside it, so a reader can still order a bucket's files by their
first offset and read them one after the other. A bin of one file gains nothing and is not made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from lakelog.lake.iceberg_scan_planner import LakeDataFile, PartitionBucket
from lakelog.lake.table_layout import SMALL_FILE_SHARE, sibling_data_file_path


@dataclass(frozen=True)
class CompactionBin:
    """Neighbouring files of one bucket, to be rewritten as the one file at ``file_path``."""

    bucket: PartitionBucket
    files: tuple[LakeDataFile, ...]
    file_path: str

    @property
    def first_offset(self) -> int:
        return self.files[0].first_offset

    @property
    def end_offset(self) -> int:
        return self.files[-1].last_offset + 1

    @property
    def record_count(self) -> int:
        return sum(file.record_count for file in self.files)

    @property
    def size_bytes(self) -> int:
        return sum(file.size_bytes for file in self.files)


def is_small(file: LakeDataFile, target_size: int) -> bool:
    return file.size_bytes < target_size * SMALL_FILE_SHARE


def worth_it(compaction: CompactionBin, target_size: int, min_files: int) -> bool:
    """A bin of at least ``min_files`` files, or one whose file is no longer small."""
    return len(compaction.files) >= min_files or compaction.size_bytes >= target_size * SMALL_FILE_SHARE


def plan_bins(by_bucket: Mapping[PartitionBucket, Sequence[LakeDataFile]], target_size: int) -> list[CompactionBin]:
    """The bins of every bucket (``by_bucket``: each bucket's files by first offset)."""
    bins: list[CompactionBin] = []
    for bucket, files in sorted(by_bucket.items()):
        run: list[LakeDataFile] = []
        for file in [*files, None]:
            joins = (
                file is not None
                and is_small(file, target_size)
                and (not run or (file.first_offset == run[-1].last_offset + 1 and sum(f.size_bytes for f in run) + file.size_bytes <= target_size))
            )
            if joins:
                run.append(file)  # type: ignore[arg-type]
                continue
            if len(run) > 1:
                bins.append(CompactionBin(bucket, tuple(run), sibling_data_file_path(run[0].path, run[0].first_offset, run[-1].last_offset + 1)))
            run = [file] if file is not None and is_small(file, target_size) else []
    return bins
