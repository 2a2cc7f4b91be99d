'use strict'

// Minimal SVG line and bar charts for the benchmark report: no browser, no native
// plotting library.

const WIDTH = 720
const HEIGHT = 360
const MARGIN = { top: 40, right: 130, bottom: 50, left: 70 }
const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b']

const escape = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

// Round tick values (1, 2 or 5 times a power of ten) covering [0, max]; whole numbers
// only when `integer` (trial numbers).
function ticks (max, count = 5, integer = false) {
  if (!(max > 0)) return [0, 1]
  const raw = max / count
  const power = 10 ** Math.floor(Math.log10(raw))
  const nice = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw)
  const step = integer ? Math.max(1, Math.round(nice)) : nice
  const out = []
  for (let v = 0; v <= max + step * 1e-9; v += step) out.push(Number(v.toPrecision(12)))
  if (out[out.length - 1] < max) out.push(Number((out[out.length - 1] + step).toPrecision(12)))
  return out
}

function frame ({ title, xLabel, yLabel, yMax, series }) {
  const plotW = WIDTH - MARGIN.left - MARGIN.right
  const plotH = HEIGHT - MARGIN.top - MARGIN.bottom
  const yTicks = ticks(yMax)
  const top = yTicks[yTicks.length - 1]
  const y = (v) => MARGIN.top + plotH - (v / top) * plotH
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${HEIGHT}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15">${escape(title)}</text>`,
    `<text x="${MARGIN.left + plotW / 2}" y="${HEIGHT - 10}" text-anchor="middle">${escape(xLabel)}</text>`,
    `<text transform="translate(16 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">${escape(yLabel)}</text>`
  ]
  for (const v of yTicks) {
    parts.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`)
    parts.push(`<text x="${MARGIN.left - 6}" y="${y(v) + 4}" text-anchor="end">${v}</text>`)
  }
  parts.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left}" y1="${MARGIN.top}" y2="${MARGIN.top + plotH}" stroke="#333"/>`)
  parts.push(`<line x1="${MARGIN.left}" x2="${MARGIN.left + plotW}" y1="${MARGIN.top + plotH}" y2="${MARGIN.top + plotH}" stroke="#333"/>`)
  series.forEach((s, i) => {
    const ly = MARGIN.top + 10 + i * 18
    parts.push(`<rect x="${WIDTH - MARGIN.right + 12}" y="${ly - 9}" width="12" height="12" fill="${COLORS[i % COLORS.length]}"/>`)
    parts.push(`<text x="${WIDTH - MARGIN.right + 30}" y="${ly + 1}">${escape(s.name)}</text>`)
  })
  return { parts, plotW, plotH, y }
}

// series: [{ name, points: [[x, y], ...] }], x numeric.
function lineChart ({ title, xLabel, yLabel, series }) {
  const xs = series.flatMap((s) => s.points.map((p) => p[0]))
  const xMin = Math.min(...xs)
  const xMax = Math.max(...xs)
  const yMax = Math.max(...series.flatMap((s) => s.points.map((p) => p[1])))
  const { parts, plotW, plotH, y } = frame({ title, xLabel, yLabel, yMax, series })
  const x = (v) => MARGIN.left + (xMax === xMin ? plotW / 2 : ((v - xMin) / (xMax - xMin)) * plotW)
  for (const v of ticks(xMax - xMin, 8, xs.every(Number.isInteger)).map((t) => t + xMin).filter((t) => t <= xMax)) {
    parts.push(`<text x="${x(v)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${v}</text>`)
  }
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]
    const d = s.points.map((p, j) => `${j ? 'L' : 'M'}${x(p[0]).toFixed(1)} ${y(p[1]).toFixed(1)}`).join(' ')
    parts.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.5"/>`)
    for (const p of s.points) parts.push(`<circle cx="${x(p[0]).toFixed(1)}" cy="${y(p[1]).toFixed(1)}" r="2" fill="${color}"/>`)
  })
  parts.push('</svg>')
  return parts.join('\n') + '\n'
}

// groups: labels along x; series: [{ name, values: [one per group] }].
function barChart ({ title, xLabel, yLabel, groups, series }) {
  const yMax = Math.max(...series.flatMap((s) => s.values.filter(Number.isFinite)))
  const { parts, plotW, plotH, y } = frame({ title, xLabel, yLabel, yMax, series })
  const groupW = plotW / groups.length
  const barW = (groupW * 0.8) / series.length
  groups.forEach((label, g) => {
    const gx = MARGIN.left + g * groupW
    parts.push(`<text x="${gx + groupW / 2}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${escape(label)}</text>`)
    series.forEach((s, i) => {
      const v = Number.isFinite(s.values[g]) ? s.values[g] : 0
      const bx = gx + groupW * 0.1 + i * barW
      parts.push(`<rect x="${bx.toFixed(1)}" y="${y(v).toFixed(1)}" width="${barW.toFixed(1)}" height="${(MARGIN.top + plotH - y(v)).toFixed(1)}" fill="${COLORS[i % COLORS.length]}"><title>${escape(s.name)} ${escape(label)}: ${v}</title></rect>`)
    })
  })
  parts.push('</svg>')
  return parts.join('\n') + '\n'
}

module.exports = { lineChart, barChart, ticks }
