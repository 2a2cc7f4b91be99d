'use strict'

// Times given on the command line (`put --expires`, `empty-trash --before`): a duration,
// a whole number and a unit (30s, 15m, 1h, 7d), or a date in ISO 8601 (2026-12-01,
// 2026-12-01T10:00, 2026-12-01T10:00:00Z, 2026-12-01T10:00:00.5+02:00). A date alone is
// midnight UTC, a time without an offset local time, as JavaScript's Date reads them.

const UNIT_MS = { s: 1000, m: 60 * 1000, h: 60 * 60 * 1000, d: 24 * 60 * 60 * 1000 }
const DURATION = /^(\d+)([smhd])$/
const DATE = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,3})?)?(?:Z|[+-](\d{2}):(\d{2}))?)?$/

const SHAPES = 'a duration such as 30s, 15m, 1h or 7d, or a date such as 2026-12-01 or 2026-12-01T10:00:00Z'

// `value` as { ms } for a duration or { date } for a date, else undefined.
function parseWhen (value) {
  const duration = DURATION.exec(value)
  if (duration) {
    const ms = Number(duration[1]) * UNIT_MS[duration[2]]
    return { ms }
  }
  const date = DATE.exec(value)
  if (!date || !realDate(date.slice(1).map((field) => Number(field ?? 0)))) return undefined
  return { date: new Date(value) }
}

// Whether the fields of a date are a day that exists and a time of that day (Date's own
// parser takes 2026-02-30 as 2 March).
function realDate ([year, month, day, hour, minute, second, offsetHours, offsetMinutes]) {
  const days = new Date(Date.UTC(year, month, 0)).getUTCDate() // day 0 of the next month
  return month >= 1 && month <= 12 && day >= 1 && day <= days && hour <= 23 && minute <= 59 && second <= 59 && offsetHours <= 23 && offsetMinutes <= 59
}

// The Date `value` names: a duration counted from `now` onwards (sign 1) or backwards
// (sign -1). Throws a RangeError naming the shapes it takes.
function timeOf (value, sign, now = Date.now()) {
  const when = parseWhen(value)
  if (!when) throw new RangeError(`must be ${SHAPES}.`)
  const date = when.date || new Date(now + sign * when.ms)
  if (Number.isNaN(date.getTime())) throw new RangeError('is beyond the times a date can hold.')
  return date
}

module.exports = { timeOf }
