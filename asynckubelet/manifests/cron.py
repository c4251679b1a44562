"""Cron schedules as the CronJob controller reads them (``robfig/cron/v3``'s
``ParseStandard``): five fields (minute, hour, day of month, month, day of week) or one
of the macros ``@yearly``/``@annually``, ``@monthly``, ``@weekly``, ``@daily``/
``@midnight`` and ``@hourly``, evaluated in a time zone.

Each field is ``*``, ``?``, a number, a range ``a-b`` or a name (``jan``, ``mon``), with
an optional step ``/n``, or a comma-separated list of those. As in cron, when both the
day of month and the day of week are restricted a day matching either runs the job;
when one of them is ``*`` only the other decides. :meth:`Schedule.next` gives the first
time strictly after a given one, to the minute, in the schedule's zone (a wall-clock time
a DST change skips is skipped; one it repeats runs once, at its first occurrence).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["MACROS", "Schedule", "ScheduleError", "parse_schedule"]

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
    )
}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}),
    (0, 23, {}),
    (1, 31, {}),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
)
_MAX_YEARS = 5
"""How far ahead :meth:`Schedule.next` looks before giving up (``robfig/cron``'s limit)."""


class ScheduleError(ValueError):
    """A schedule that does not parse; the message is ``robfig/cron``'s."""


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: the values each field allows, and whether the day fields were
    ``*`` (unrestricted)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    def _day_matches(self, moment: datetime) -> bool:
        dom = moment.day in self.days
        dow = (moment.isoweekday() % 7) in self.weekdays
        if self.any_day or self.any_weekday:
            return dom and dow
        return dom or dow

    def next(self, after: datetime, zone: tzinfo = UTC) -> datetime | None:
        """The first time the schedule fires strictly after ``after`` (aware), in
        ``zone``; None when none comes within five years."""
        local = after.astimezone(zone).replace(second=0, microsecond=0, tzinfo=None)
        moment = local + timedelta(minutes=1)
        limit = moment.year + _MAX_YEARS
        while moment.year <= limit:
            if moment.month not in self.months:
                year, month = (
                    (moment.year + 1, 1)
                    if moment.month == 12
                    else (
                        moment.year,
                        moment.month + 1,
                    )
                )
                moment = datetime(year, month, 1)
                continue
            if not self._day_matches(moment):
                moment = datetime(moment.year, moment.month, moment.day) + timedelta(days=1)
                continue
            if moment.hour not in self.hours:
                moment = moment.replace(minute=0) + timedelta(hours=1)
                continue
            if moment.minute not in self.minutes:
                moment += timedelta(minutes=1)
                continue
            found = _aware(moment, zone)
            if found is not None and found > after:
                return found
            moment += timedelta(minutes=1)
        return None


def _aware(local: datetime, zone: tzinfo) -> datetime | None:
    """``local`` in ``zone``, or None when that wall-clock time does not exist there."""
    first = local.replace(tzinfo=zone, fold=0)
    round_trip = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
    if round_trip != local:
        return None
    return first.astimezone(UTC)


def _number(text: str, names: dict[str, int]) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    if not text.isdigit():
        raise ScheduleError(
            f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax'
        )
    return int(text)


def _field(text: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, slash, step_text = part.partition("/")
        if body in ("*", "?"):
            start, end = low, high
        else:
            first, dash, last = body.partition("-")
            start = _number(first, names)
            end = _number(last, names) if dash else start
            if slash and not dash:
                end = high
        step = 1
        if slash:
            step = _number(step_text, {})
            if step <= 0:
                raise ScheduleError(f"step of range should be a positive number: {part}")
        if start < low:
            raise ScheduleError(f"beginning of range ({start}) below minimum ({low}): {part}")
        if end > high:
            raise ScheduleError(f"end of range ({end}) above maximum ({high}): {part}")
        if start > end:
            raise ScheduleError(f"beginning of range ({start}) beyond end of range ({end}): {part}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse_schedule(text: str) -> Schedule:
    """``cron.ParseStandard``: the schedule, or :class:`ScheduleError`."""
    spec = text.strip()
    if not spec:
        raise ScheduleError("empty spec string")
    if spec.startswith("@"):
        if spec not in MACROS:
            raise ScheduleError(f"unrecognized descriptor: {spec}")
        spec = MACROS[spec]
    fields = spec.split()
    if len(fields) != len(_BOUNDS):
        raise ScheduleError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    parsed = [
        _field(f, low, high, names) for f, (low, high, names) in zip(fields, _BOUNDS, strict=True)
    ]
    return Schedule(
        minutes=parsed[0],
        hours=parsed[1],
        days=parsed[2],
        months=parsed[3],
        weekdays=parsed[4],
        any_day=fields[2].startswith(("*", "?")),
        any_weekday=fields[4].startswith(("*", "?")),
    )
