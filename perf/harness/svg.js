'use strict'

// Minimal SVG line and bar charts for the benchmark reports: no browser, no native
// plotting library. An axis is linear, or logarithmic for figures that span orders of
// magnitude (plain files read from the page cache beside kfs), which a linear axis
// draws as slivers; a log axis says so in its label.
//
// What a chart must say: its title whether lower or higher is better, its
// subtitle n and the machine, its legend what the whiskers are. A bar chart may have
// whiskers (a series' `errors`: [low, high] per bar) and a reference line (`reference`,
// say 1.0 on a ratio chart, marked and labelled; bars then rise or fall from it). A
// series drawn in `grey` (published figures from other hardware) is grey, dashed when a
// line, and says so in its name.

const PLOT_WIDTH = 520 // the chart is as much wider as its axis labels and legend need
const HEIGHT = 360
const FONT = 12
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b']
const GREY = '#9a9a9a'
const colorOf = (s, i) => (s.grey ? GREY : COLORS[i % COLORS.length])

const escape = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
const label = (v) => v.toLocaleString('en-US', { maximumSignificantDigits: 12 })
const round = (v) => Number(v.toPrecision(12)) // 0.1 * 3 is 0.30000000000000004

// The width of a text in px, estimated, as there are no font metrics without a renderer.
// Generous on purpose, so that a legend measured to fit does: sans-serif is usually
// DejaVu Sans, about 0.6 em per lower-case letter or digit and up to 1 em per capital.
const textWidth = (text, size = FONT) => [...String(text)].reduce((w, c) => w + (/[A-Zmw@%]/.test(c) ? 0.95 : 0.75) * size, 0)

// 1, 2 and 5 times the powers of ten around [min, max].
function niceNumbers (min, max, multiples = [1, 2, 5]) {
  const out = []
  for (let e = Math.floor(Math.log10(min)) - 1; e <= Math.ceil(Math.log10(max)) + 1; e++) for (const m of multiples) out.push(round(m * 10 ** e))
  return out
}

// A linear axis over [min, max]: ticks at a step of 1, 2 or 5 times a power of ten
// (whole numbers when `integer`), from a multiple of it at or below min to one at or
// above max, so that both ends of the data are on the axis. at(v): 0 at the first
// tick, 1 at the last.
function linearAxis (min, max, { count = 5, integer = false } = {}) {
  const raw = max > min ? (max - min) / count : 1
  let step = niceNumbers(raw, raw).find((s) => s >= raw * (1 - 1e-9))
  if (integer) step = Math.max(1, Math.round(step))
  const lo = round(Math.floor(min / step + 1e-9) * step)
  const hi = Math.max(round(Math.ceil(max / step - 1e-9) * step), round(lo + step))
  const ticks = []
  for (let i = 0; lo + i * step <= hi + step * 1e-9; i++) ticks.push(round(lo + i * step))
  return { log: false, ticks, at: (v) => (v - lo) / (hi - lo) }
}

// A log axis over [min, max] (both above 0): from the largest of 1, 2 or 5 times a power
// of ten at or below min to the smallest at or above max, each a tick; beyond three
// decades, from power of ten to power of ten, ticks at powers of ten only.
function logAxis (min, max) {
  const wide = max / min > 1000
  const candidates = niceNumbers(min, max, wide ? [1] : [1, 2, 5])
  const lo = candidates.filter((v) => v <= min * (1 + 1e-9)).pop()
  let hi = candidates.find((v) => v >= max * (1 - 1e-9))
  if (hi === lo) hi = candidates.find((v) => v > lo)
  return { log: true, ticks: candidates.filter((v) => v >= lo && v <= hi), at: (v) => Math.log(v / lo) / Math.log(hi / lo) }
}

// The axis for `values` on the given scale; a linear one from `from` (0 for bars and
// times) when given. Values a log axis cannot show (0 and below) are left out.
function axis (scale, values, { from, ...options } = {}) {
  if (scale === 'log') {
    const positive = values.filter((v) => v > 0)
    return positive.length ? logAxis(Math.min(...positive), Math.max(...positive)) : logAxis(1, 10)
  }
  const finite = values.filter(Number.isFinite)
  const min = Math.min(...finite, ...(from === undefined ? [] : [from]))
  return finite.length ? linearAxis(min, Math.max(...finite), options) : linearAxis(0, 1, options)
}
const shows = (ax, v) => Number.isFinite(v) && (!ax.log || v > 0)
const axisLabel = (text, ax) => (ax.log ? `${text} (log scale)` : text)

// The chart's frame: title, notes (subtitle in grey, mark in bold red: a warning such as
// "measures nothing"), axes with ticks and grid, and the legend to the right, as wide as
// its longest name. Returns the parts so far and px(x fraction), py(y value).
function frame ({ title, subtitle, mark, xLabel, yLabel, series, y, reference, referenceLabel, legendNote }) {
  const notes = [...[subtitle].flat().filter(Boolean).map((text) => ({ text, style: 'fill="#555"' })), mark && { text: mark, style: 'fill="#b00000" font-weight="bold"' }].filter(Boolean)
  const left = Math.max(70, 34 + Math.max(...y.ticks.map((v) => textWidth(label(v)))))
  const box = { top: 40 + 16 * notes.length, bottom: HEIGHT - 50, left, right: left + PLOT_WIDTH }
  const legendX = box.right + 16
  const notesBelow = [legendNote].flat().filter(Boolean)
  const width = Math.ceil(Math.max(legendX + 18 + Math.max(0, ...series.map((s) => textWidth(s.name)), ...notesBelow.map((t) => textWidth(t, 11) - 18)) + 8,
    textWidth(title, 15) + 16, ...notes.map((n) => textWidth(n.text) + 16)))
  const px = (f) => box.left + f * (box.right - box.left)
  const py = (v) => box.bottom - y.at(v) * (box.bottom - box.top)
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${HEIGHT}" viewBox="0 0 ${width} ${HEIGHT}" font-family="sans-serif" font-size="${FONT}">`,
    `<rect width="${width}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${width / 2}" y="22" text-anchor="middle" font-size="15">${escape(title)}</text>`,
    ...notes.map((n, i) => `<text class="note" x="${width / 2}" y="${40 + 16 * i}" text-anchor="middle" ${n.style}>${escape(n.text)}</text>`),
    `<text x="${px(0.5)}" y="${HEIGHT - 10}" text-anchor="middle">${escape(xLabel)}</text>`,
    `<text transform="translate(16 ${(box.top + box.bottom) / 2}) rotate(-90)" text-anchor="middle">${escape(axisLabel(yLabel, y))}</text>`
  ]
  for (const v of y.ticks) {
    parts.push(`<line x1="${box.left}" x2="${box.right}" y1="${py(v)}" y2="${py(v)}" stroke="#ddd"/>`)
    parts.push(`<text class="y-tick" x="${box.left - 6}" y="${py(v) + 4}" text-anchor="end">${label(v)}</text>`)
  }
  parts.push(`<line x1="${box.left}" x2="${box.left}" y1="${box.top}" y2="${box.bottom}" stroke="#333"/>`)
  parts.push(`<line x1="${box.left}" x2="${box.right}" y1="${box.bottom}" y2="${box.bottom}" stroke="#333"/>`)
  if (reference !== undefined) {
    parts.push(`<line class="reference" x1="${box.left}" x2="${box.right}" y1="${py(reference)}" y2="${py(reference)}" stroke="#000" stroke-width="1.5" stroke-dasharray="6 3"/>`)
  }
  const rows = series.length + (reference !== undefined ? 1 : 0)
  series.forEach((s, i) => {
    const ly = box.top + 10 + i * 18
    parts.push(`<rect x="${legendX}" y="${ly - 9}" width="12" height="12" fill="${colorOf(s, i)}"/>`)
    parts.push(`<text class="legend" x="${legendX + 18}" y="${ly + 1}"${s.grey ? ` fill="${GREY}"` : ''}>${escape(s.name)}</text>`)
  })
  if (reference !== undefined) {
    const ly = box.top + 10 + series.length * 18
    parts.push(`<line x1="${legendX}" x2="${legendX + 12}" y1="${ly - 3}" y2="${ly - 3}" stroke="#000" stroke-width="1.5" stroke-dasharray="4 2"/>`)
    parts.push(`<text class="legend-note" x="${legendX + 18}" y="${ly + 1}">${escape(referenceLabel || `${label(reference)}: equal`)}</text>`)
  }
  notesBelow.forEach((text, j) => {
    parts.push(`<text class="legend-note" x="${legendX}" y="${box.top + 10 + rows * 18 + 8 + j * 15}" font-size="11" fill="#555">${escape(text)}</text>`)
  })
  return { parts, box, px, py }
}

// series: [{ name, points: [[x, y], ...] }], x numeric; xScale, yScale: 'linear' or 'log'.
function lineChart ({ title, subtitle, mark, legendNote, xLabel, yLabel, xScale = 'linear', yScale = 'linear', series }) {
  const xs = series.flatMap((s) => s.points.map((p) => p[0]))
  const x = axis(xScale, xs, { count: 8, integer: xs.every(Number.isInteger) })
  const y = axis(yScale, series.flatMap((s) => s.points.map((p) => p[1])), { from: 0 })
  const { parts, box, px, py } = frame({ title, subtitle, mark, legendNote, xLabel: axisLabel(xLabel, x), yLabel, series, y })
  for (const v of x.ticks) parts.push(`<text class="x-tick" x="${px(x.at(v))}" y="${box.bottom + 16}" text-anchor="middle">${label(v)}</text>`)
  series.forEach((s, i) => {
    const color = colorOf(s, i)
    const points = s.points.filter((p) => shows(x, p[0]) && shows(y, p[1])).map((p) => [px(x.at(p[0])).toFixed(1), py(p[1]).toFixed(1)])
    parts.push(`<path d="${points.map((p, j) => `${j ? 'L' : 'M'}${p[0]} ${p[1]}`).join(' ')}" fill="none" stroke="${color}" stroke-width="1.5"${s.grey ? ' stroke-dasharray="5 3"' : ''}/>`)
    for (const p of points) parts.push(`<circle cx="${p[0]}" cy="${p[1]}" r="2" fill="${color}"/>`)
  })
  parts.push('</svg>')
  return parts.join('\n') + '\n'
}

// groups: labels along x; series: [{ name, values: [one per group], errors: [[low, high]
// per group], grey }]; yScale: 'linear' or 'log' (bars then rise from the axis's lowest
// tick, or from `reference`). A missing value has no bar.
function barChart ({ title, subtitle, mark, legendNote, xLabel, yLabel, yScale = 'linear', reference, referenceLabel, groups, series }) {
  const values = series.flatMap((s) => [...s.values, ...(s.errors || []).flat()])
  const y = axis(yScale, reference === undefined ? values : [...values, reference], { from: 0 })
  const { parts, box, py } = frame({ title, subtitle, mark, legendNote, xLabel, yLabel, series, y, reference, referenceLabel })
  const base = reference !== undefined ? py(reference) : y.log ? box.bottom : py(0)
  const groupW = (box.right - box.left) / groups.length
  const barW = (groupW * 0.8) / series.length
  groups.forEach((group, g) => {
    const gx = box.left + g * groupW
    parts.push(`<text x="${gx + groupW / 2}" y="${box.bottom + 16}" text-anchor="middle">${escape(group)}</text>`)
    series.forEach((s, i) => {
      const v = s.values[g]
      if (!shows(y, v)) return
      const bx = gx + groupW * 0.1 + i * barW
      const top = Math.min(py(v), base)
      parts.push(`<rect x="${bx.toFixed(1)}" y="${top.toFixed(1)}" width="${barW.toFixed(1)}" height="${Math.abs(base - py(v)).toFixed(1)}" fill="${colorOf(s, i)}"><title>${escape(s.name)} ${escape(group)}: ${v}</title></rect>`)
      const [low, high] = (s.errors || [])[g] || []
      if (shows(y, low) && shows(y, high)) {
        const cx = (bx + barW / 2).toFixed(1)
        const w = Math.min(8, barW / 3)
        parts.push(`<path class="whisker" d="M${cx} ${py(low).toFixed(1)} V${py(high).toFixed(1)} M${(bx + barW / 2 - w).toFixed(1)} ${py(low).toFixed(1)} h${(2 * w).toFixed(1)} M${(bx + barW / 2 - w).toFixed(1)} ${py(high).toFixed(1)} h${(2 * w).toFixed(1)}" stroke="#222" stroke-width="1.2" fill="none"/>`)
      }
    })
  })
  parts.push('</svg>')
  return parts.join('\n') + '\n'
}

module.exports = { lineChart, barChart, linearAxis, logAxis, textWidth }
