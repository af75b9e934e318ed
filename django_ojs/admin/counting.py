"""The admin changelist's paginator for big tables: counts that stop at a bound (``core/counting.py``)."""

from __future__ import annotations

import math

from django.core.paginator import Paginator
from django.utils.functional import cached_property

from ..core.counting import EXACT_COUNT_LIMIT, Tally, count_rows


class EstimatedCountPaginator(Paginator):
    """The admin changelist's paginator for big tables.

    Counts with ``count_rows``. When the count is an estimate, only the
    first ``EXACT_COUNT_LIMIT`` rows are reachable by page number: the bounded
    count proved they exist, and the ``OFFSET`` stays small. Beyond them an
    operator narrows the list with filters or search, which is what a deep
    page number would have been a poor substitute for.
    """

    exact_count_limit = EXACT_COUNT_LIMIT

    @cached_property
    def tally(self) -> Tally:
        return count_rows(self.object_list, self.exact_count_limit)

    @cached_property
    def count(self) -> int:
        return self.tally.value

    @cached_property
    def num_pages(self) -> int:
        if self.tally.exact:
            return super().num_pages
        return max(1, math.ceil(min(self.count, self.exact_count_limit) / self.per_page))

    @property
    def reachable_rows(self) -> str:
        return f"{min(self.count, self.num_pages * self.per_page):,}"
