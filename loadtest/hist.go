package main

import (
	"math"
	"math/bits"
)

// hist is a log-linear histogram of non-negative integer values (the load
// generator records microseconds), in the manner of HDR histograms: values
// below 2·histSub are counted exactly; above, each power-of-two range
// [2^k, 2^(k+1)) is split into histSub equal buckets, so a bucket is never
// wider than 1/histSub of the values it holds (0.8% with histSub = 128).
// Percentiles are reported as the highest value of their bucket, capped at
// the exact maximum, so they are never below the true percentile and at
// most 0.8% above it.
type hist struct {
	counts [histBuckets]uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

const (
	histSubBits = 7
	histSub     = 1 << histSubBits
	// histMaxShift bounds the range: values up to 2^(histMaxShift+histSubBits+1)-1
	// (about 2.1e9: 35 minutes in microseconds) are bucketed; larger ones
	// land in the last bucket (the exact max is still kept).
	histMaxShift = 24
	histBuckets  = (histMaxShift+1)*histSub + histSub
)

// histIndex maps v to its bucket.
func histIndex(v int64) int {
	if v < 0 {
		v = 0
	}
	u := uint64(v)
	if u < histSub {
		return int(u)
	}
	shift := bits.Len64(u) - (histSubBits + 1) // ≥ 0
	if shift > histMaxShift {
		return histBuckets - 1
	}
	return shift*histSub + int(u>>uint(shift))
}

// histBounds is the range of values [lo, hi] that bucket i holds.
func histBounds(i int) (lo, hi int64) {
	if i < histSub {
		return int64(i), int64(i)
	}
	shift := i/histSub - 1
	top := int64(i - shift*histSub) // in [histSub, 2·histSub)
	return top << uint(shift), (top+1)<<uint(shift) - 1
}

func (h *hist) record(v int64) {
	if v < 0 {
		v = 0
	}
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.counts[histIndex(v)]++
	h.n++
	h.sum += float64(v)
}

// merge adds o's counts to h.
func (h *hist) merge(o *hist) {
	if o.n == 0 {
		return
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	for i, c := range o.counts {
		if c != 0 {
			h.counts[i] += c
		}
	}
	h.n += o.n
	h.sum += o.sum
}

func (h *hist) reset() { *h = hist{} }

// quantile returns the value at quantile q (0..1): the highest value of the
// bucket holding the ⌈q·n⌉-th smallest value, capped at the maximum.
func (h *hist) quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := histBounds(i)
			return min(max(hi, h.min), h.max)
		}
	}
	return h.max
}

func (h *hist) mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// summary is a histogram's figures in milliseconds, for the report.
type summary struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P95   float64 `json:"p95_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p999_ms"`
	Max   float64 `json:"max_ms"`
}

// summarize reads a histogram of microseconds.
func (h *hist) summarize() summary {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return summary{Count: h.n, Mean: h.mean() / 1000, P50: ms(h.quantile(0.50)), P90: ms(h.quantile(0.90)),
		P95: ms(h.quantile(0.95)), P99: ms(h.quantile(0.99)), P999: ms(h.quantile(0.999)), Max: ms(h.max)}
}
