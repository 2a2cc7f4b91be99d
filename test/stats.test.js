'use strict'

const { expect } = require('chai')
const stats = require('../perf/harness/stats')

describe('benchmark statistics', () => {
  it('mean, sample standard deviation, median and percentiles', () => {
    const xs = [2, 4, 4, 4, 5, 5, 7, 9]
    expect(stats.mean(xs)).to.equal(5)
    expect(stats.sd(xs)).to.be.closeTo(2.138089935, 1e-9) // sqrt(32 / 7)
    expect(stats.median([3, 1, 2])).to.equal(2)
    expect(stats.median([4, 1, 3, 2])).to.equal(2.5)
    expect(stats.percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95)).to.be.closeTo(9.55, 1e-12) // numpy: 9.55
    expect(stats.sd([1])).to.be.NaN
  })

  it('log-gamma and the regularized incomplete beta function', () => {
    expect(stats.logGamma(5)).to.be.closeTo(Math.log(24), 1e-12)
    expect(stats.logGamma(0.5)).to.be.closeTo(Math.log(Math.sqrt(Math.PI)), 1e-12)
    expect(stats.regularizedBeta(0.5, 2, 2)).to.be.closeTo(0.5, 1e-12)
    expect(stats.regularizedBeta(0.3, 1, 1)).to.be.closeTo(0.3, 1e-12)
    expect(stats.regularizedBeta(0.2, 2, 3)).to.be.closeTo(0.1808, 1e-12) // 1 - (1-x)^3 (1+3x)
  })

  it('two-sided Student t p-values match the tables', () => {
    expect(stats.studentTwoSided(2.228, 10)).to.be.closeTo(0.05, 5e-4)
    expect(stats.studentTwoSided(2.571, 5)).to.be.closeTo(0.05, 5e-4)
    expect(stats.studentTwoSided(2.750, 30)).to.be.closeTo(0.01, 2e-4)
    expect(stats.studentTwoSided(1.96, 1e6)).to.be.closeTo(0.05, 2e-4)
    expect(stats.studentTwoSided(0, 7)).to.be.closeTo(1, 1e-12)
    expect(stats.studentTwoSided(-2.228, 10)).to.be.closeTo(0.05, 5e-4)
  })

  it("Welch's t-test reproduces the textbook example", () => {
    // Wikipedia, "Welch's t-test", example 1: t = -2.46, df = 24.99, p = 0.021
    const a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    const b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    const { t, df, p } = stats.welch(a, b)
    expect(t).to.be.closeTo(-2.46, 0.005)
    expect(df).to.be.closeTo(24.99, 0.005)
    expect(p).to.be.closeTo(0.021, 0.0005)
  })

  it('handles samples without spread or too small to test', () => {
    expect(stats.welch([1, 1, 1], [1, 1, 1]).p).to.equal(1)
    expect(stats.welch([1, 1, 1], [2, 2, 2]).p).to.equal(0)
    expect(stats.welch([1], [2, 3]).p).to.be.NaN
  })
})
