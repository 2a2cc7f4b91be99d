'use strict'

// Descriptive statistics and Welch's two-sided t-test, for the benchmark report.

function mean (xs) {
  return xs.reduce((a, b) => a + b, 0) / xs.length
}

// Sample standard deviation (n - 1).
function sd (xs) {
  if (xs.length < 2) return NaN
  const m = mean(xs)
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1))
}

// Percentile by linear interpolation between closest ranks (numpy's default).
function percentile (xs, p) {
  const s = [...xs].sort((a, b) => a - b)
  const rank = (p / 100) * (s.length - 1)
  const lo = Math.floor(rank)
  const hi = Math.ceil(rank)
  return s[lo] + (s[hi] - s[lo]) * (rank - lo)
}

const median = (xs) => percentile(xs, 50)

// Welch's t-test: t, Welch–Satterthwaite degrees of freedom, two-sided p-value.
function welch (a, b) {
  if (a.length < 2 || b.length < 2) return { t: NaN, df: NaN, p: NaN }
  const va = sd(a) ** 2 / a.length
  const vb = sd(b) ** 2 / b.length
  const diff = mean(a) - mean(b)
  if (va + vb === 0) return { t: diff === 0 ? 0 : Math.sign(diff) * Infinity, df: a.length + b.length - 2, p: diff === 0 ? 1 : 0 }
  const t = diff / Math.sqrt(va + vb)
  const df = (va + vb) ** 2 / (va ** 2 / (a.length - 1) + vb ** 2 / (b.length - 1))
  return { t, df, p: studentTwoSided(t, df) }
}

// P(|T| >= |t|) for Student's t with df degrees of freedom.
function studentTwoSided (t, df) {
  if (!Number.isFinite(t)) return 0
  return regularizedBeta(df / (df + t * t), df / 2, 0.5)
}

// Lanczos approximation (g = 7, n = 9), accurate to about 15 digits.
const LANCZOS = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
  -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7]

function logGamma (x) {
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x)
  x -= 1
  let a = LANCZOS[0]
  const t = x + 7.5
  for (let i = 1; i < 9; i++) a += LANCZOS[i] / (x + i)
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a)
}

// The regularized incomplete beta function I_x(a, b), by its continued fraction
// (Numerical Recipes, 6.4), using the symmetry I_x(a, b) = 1 - I_{1-x}(b, a) where the
// fraction converges slowly.
function regularizedBeta (x, a, b) {
  if (x <= 0) return 0
  if (x >= 1) return 1
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x))
  if (x < (a + 1) / (a + b + 2)) return (front * betaFraction(x, a, b)) / a
  return 1 - (front * betaFraction(1 - x, b, a)) / b
}

function betaFraction (x, a, b) {
  const TINY = 1e-300
  let c = 1
  let d = 1 - ((a + b) * x) / (a + 1)
  if (Math.abs(d) < TINY) d = TINY
  d = 1 / d
  let h = d
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2))
    d = 1 + aa * d
    if (Math.abs(d) < TINY) d = TINY
    c = 1 + aa / c
    if (Math.abs(c) < TINY) c = TINY
    d = 1 / d
    h *= d * c
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1))
    d = 1 + aa * d
    if (Math.abs(d) < TINY) d = TINY
    c = 1 + aa / c
    if (Math.abs(c) < TINY) c = TINY
    d = 1 / d
    const delta = d * c
    h *= delta
    if (Math.abs(delta - 1) < 1e-15) break
  }
  return h
}

module.exports = { mean, sd, percentile, median, welch, studentTwoSided, regularizedBeta, logGamma }
